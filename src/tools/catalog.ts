// Which tools a turn sees, computed in one place: the built-ins and the tools of the providers (custom tool folders,
// MCP servers), narrowed by the turn's kind, the persona's deny list (names and groups; deny wins), a task's limits,
// and split into the tiers: core tools are callable with their whole schema; search-tier tools are listed in the
// system prompt by name and become callable once tool_activate has activated them.
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import { SUBAGENT_EXCLUDED_TOOLS } from '#src/subagents/service.ts';
import type { TurnKind } from '#src/turns.ts';
import { scrubSecrets } from './scrub.ts';
import type { Tool, ToolGroup, ToolProvider } from './types.ts';

/** The groups a persona can name as `group:<name>` (and `group:mcp:<server>`). */
export const TOOL_GROUPS = ['fs', 'web', 'runtime', 'memory', 'messaging', 'agents', 'schedule', 'mcp', 'custom'] as const satisfies readonly ToolGroup[];

/** The tools that find and activate search-tier tools: offered only to a turn that has some. */
export const TIER_TOOLS = ['tool_search', 'tool_activate'] as const;

/** Tools a conversation keeps activated at once (past it, the longest active makes room). */
export const MAX_ACTIVE_TOOLS = 16;

const GROUP_ENTRY = /^group:([a-z]+)(?::([a-z][a-z0-9_]*))?$/;

/** Whether an entry of a deny, allow or approve list names this tool: by its name, its group, or its MCP server's group. */
export function entryNames(entry: string, tool: Pick<Tool, 'name' | 'group' | 'server'>): boolean {
  if (entry === tool.name) return true;
  const group = GROUP_ENTRY.exec(entry);
  if (!group) return false;
  if (group[2] !== undefined) return group[1] === 'mcp' && tool.group === 'mcp' && tool.server === group[2];
  return tool.group !== undefined && tool.group !== 'other' && group[1] === tool.group;
}

export function listNames(list: readonly string[], tool: Pick<Tool, 'name' | 'group' | 'server'>): boolean {
  return list.some((entry) => entryNames(entry, tool));
}

/** Why a `group:` entry names no group, or undefined when it is one (`group:mcp:<server>` for any server name). */
export function badGroupEntry(entry: string): string | undefined {
  if (!entry.startsWith('group:')) return undefined;
  const group = GROUP_ENTRY.exec(entry);
  if (group && (TOOL_GROUPS as readonly string[]).includes(group[1]!) && (group[2] === undefined || group[1] === 'mcp')) return undefined;
  return `"${entry}" is not a group; the groups are ${TOOL_GROUPS.map((g) => `group:${g}`).join(', ')} and group:mcp:<server>`;
}

export interface TurnToolsRequest {
  persona: Persona;
  kind: TurnKind;
  /** A task's depth and the tools it was given (null: all it may have). */
  task?: { depth: number; tools: string[] | null };
  /** The search-tier tools the conversation activated earlier (oldest first). */
  active?: readonly string[];
}

/** Every tool a persona has now, and what each provider could not load (for the log and `parlor doctor`). */
export class ToolCatalog {
  constructor(
    private readonly builtins: readonly Tool[],
    private readonly providers: readonly ToolProvider[] = [],
    private readonly log?: Logger,
  ) {}

  /** The built-ins, then each provider's tools (a name already taken is left out), but those of `skip`. */
  async all(persona: Persona, options: { skip?: readonly string[] } = {}): Promise<Tool[]> {
    const tools = [...this.builtins];
    const taken = new Set(tools.map((t) => t.name));
    for (const provider of this.providers) {
      if (options.skip?.includes(provider.name)) continue;
      let provided: Tool[];
      try {
        provided = await provider.tools(persona);
      } catch (err) {
        this.log?.warn({ err, provider: provider.name, persona: persona.name }, 'a tool provider failed; its tools are left out of this turn');
        continue;
      }
      for (const tool of provided) {
        if (taken.has(tool.name)) continue;
        taken.add(tool.name);
        tools.push(tool);
      }
    }
    return tools;
  }

  /** The built-in tools (for the checks made at start-up). */
  get builtinTools(): readonly Tool[] {
    return this.builtins;
  }

  async forTurn(request: TurnToolsRequest): Promise<TurnTools> {
    const visible = visibleTools(await this.all(request.persona), request).map((tool) => shownTo(tool, request.persona));
    return new TurnTools(visible, request);
  }

  async close(): Promise<void> {
    for (const provider of this.providers) await provider.close?.().catch((err: unknown) => this.log?.warn({ err, provider: provider.name }, 'a tool provider did not stop cleanly'));
  }
}

/** Per tool that comes from outside (custom, MCP), what each persona is shown of it: the same object turn after turn. */
const shown = new WeakMap<Tool, Map<string, Tool>>();

/**
 * A custom or MCP tool as the model is shown it: its description and schema (written by whoever wrote the tool or
 * runs the server) with the persona's secrets and anything shaped like a credential masked, as its results are.
 */
function shownTo(tool: Tool, persona: Persona): Tool {
  if (tool.tier !== 'search') return tool;
  let copies = shown.get(tool);
  if (!copies) shown.set(tool, (copies = new Map()));
  const key = `${persona.name}\u0000${Object.values(persona.secrets).join('\u0000')}`;
  let copy = copies.get(key);
  if (!copy) {
    const secrets = Object.values(persona.secrets);
    const description = scrubSecrets(tool.description, secrets);
    const schema = JSON.stringify(tool.parameters);
    const masked = scrubSecrets(schema, secrets);
    copy = description === tool.description && masked === schema ? tool : { ...tool, description, parameters: masked === schema ? tool.parameters : safeParse(masked, tool.parameters) };
    copies.set(key, copy);
  }
  return copy;
}

/** The masked schema, or the original's shape without its texts when masking broke the JSON. */
function safeParse(text: string, original: Record<string, unknown>): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { type: (original.type as string | undefined) ?? 'object' };
  }
}

/**
 * The tools a turn of this kind may see, before tiers: offered in its kind, available, not denied (by name or group;
 * deny wins over allow and approve), and for a task not one that talks to people or starts more work (unless it may
 * nest), narrowed to the tools it was given.
 */
export function visibleTools(tools: readonly Tool[], request: TurnToolsRequest): Tool[] {
  const { persona, kind, task } = request;
  const nests = (task?.depth ?? 1) < persona.tools.subagents.maxDepth;
  const taskTools = ['spawn_subagent', 'task_status', 'task_cancel'];
  return tools.filter((t) => {
    if (t.contexts && !t.contexts.includes(kind)) return false;
    if (listNames(persona.tools.deny, t)) return false;
    if (!(t.available?.({ persona, kind }) ?? true)) return false;
    if (kind !== 'task') return true;
    if ((SUBAGENT_EXCLUDED_TOOLS as readonly string[]).includes(t.name) && !(nests && taskTools.includes(t.name))) return false;
    return !task?.tools || task.tools.includes(t.name) || t.name === 'end_task' || (TIER_TOOLS as readonly string[]).includes(t.name);
  });
}

/**
 * One turn's tools. The core tools are callable throughout; a search-tier tool becomes callable from the model call
 * after tool_activate activated it (or at once when the persona pre-activates it in tools.jsonc, or a task was given
 * it by name), and stays so for the conversation until /new.
 */
export class TurnTools {
  private readonly active: string[];
  /** Activations of tools this turn does not have (another kind of turn's): kept for the conversation as they were. */
  private readonly elsewhere: string[];
  private readonly searchTier: Tool[];
  private readonly core: Tool[];

  constructor(
    visible: readonly Tool[],
    private readonly request: TurnToolsRequest,
  ) {
    // Pre-activated by the persona (names or groups), or given to a task by name: callable from the start.
    const always = (t: Tool) => listNames(request.persona.tools.activate, t) || (request.task?.tools?.includes(t.name) ?? false);
    this.searchTier = visible.filter((t) => t.tier === 'search' && !always(t));
    const tiered = this.searchTier.length > 0;
    this.core = visible.filter((t) => (t.tier !== 'search' || always(t)) && (tiered || !(TIER_TOOLS as readonly string[]).includes(t.name)));
    const known = new Set(this.searchTier.map((t) => t.name));
    this.active = (request.active ?? []).filter((name) => known.has(name)).slice(-MAX_ACTIVE_TOOLS);
    this.elsewhere = (request.active ?? []).filter((name) => !known.has(name));
  }

  /** What the next model call may call: the core tools and the activated ones. */
  callable(): Tool[] {
    const active = new Set(this.active);
    return [...this.core, ...this.searchTier.filter((t) => active.has(t.name))];
  }

  /** Every search-tier tool of the turn, active or not: the system prompt lists them (the same list all along). */
  listed(): readonly Tool[] {
    return this.searchTier;
  }

  /** The conversation's activated tools, oldest first (to be kept until /new), this turn's and others'. */
  activeNames(): readonly string[] {
    return [...this.elsewhere, ...this.active].slice(-MAX_ACTIVE_TOOLS * 2);
  }

  /** A search-tier tool by name, or undefined. */
  find(name: string): Tool | undefined {
    return this.searchTier.find((t) => t.name === name);
  }

  /** Whether the tool is listed but not callable yet (a call of it is told to activate it first). */
  inactive(name: string): boolean {
    return this.find(name) !== undefined && !this.active.includes(name);
  }

  /**
   * Makes a search-tier tool callable from the next model call. Past the cap the longest-active one makes room;
   * its name is returned so the model can be told.
   */
  activate(name: string): { tool: Tool; already?: true; evicted?: string } | { error: string } {
    const tool = this.find(name);
    if (!tool) {
      if (this.core.some((t) => t.name === name)) return { error: `${name} is always callable; there is no need to activate it` };
      return { error: `there is no tool named "${name}" to activate; tool_search finds them` };
    }
    if (this.active.includes(name)) return { tool, already: true };
    this.active.push(name);
    const evicted = this.active.length > MAX_ACTIVE_TOOLS ? this.active.shift() : undefined;
    return evicted ? { tool, evicted } : { tool };
  }

  /** Search-tier tools whose name or description has the query's words, best first. */
  search(query: string, limit: number): Tool[] {
    const words = query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
    if (!words.length) return this.searchTier.slice(0, limit);
    const scored = this.searchTier
      .map((tool) => {
        const name = tool.name.toLowerCase();
        const text = `${name.replace(/_/g, ' ')} ${tool.description.toLowerCase()}`;
        const score = words.reduce((sum, w) => sum + (name.includes(w) ? 3 : 0) + (text.includes(w) ? 1 : 0), 0);
        return { tool, score };
      })
      .filter((s) => s.score > 0)
      .sort((a, b) => b.score - a.score || a.tool.name.localeCompare(b.tool.name));
    return scored.slice(0, limit).map((s) => s.tool);
  }

  get kind(): TurnKind {
    return this.request.kind;
  }
}
