import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import pino, { type Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import type { Tool, ToolContext, ToolProvider } from '#src/tools/types.ts';
import { createMcpFileReader, resolveSecrets, type McpServerEntry, type SecretSource } from './config.ts';
import type { ConnectionTimings, ListedTool, McpConnection } from './connection.ts';
import { settleWithin } from '#src/retry.ts';
import type { McpServerStatus, McpStatus } from './status.ts';
import { distinctToolName, listNames, parlorToolName, toolParameters } from './tool-shape.ts';
import type { ServerTarget } from './transport.ts';

export interface McpToolProviderOptions {
  /** The global `mcp.jsonc` (`<PARLOR_HOME>/mcp.jsonc`): servers every persona gets unless it declares its own. */
  globalFile: string;
  /** Where `$NAME` in the global file comes from (persona files use the persona's secrets). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where stdio servers take PATH, HOME and the locale from (default process.env; nothing else of it passes). */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  log?: Logger;
  /** Health checks of connected servers (default 30 s). */
  pingIntervalMs?: number;
  /** Each step of connecting gives up after this long (default 30 s: `npx -y` may download the server first). */
  connectTimeoutMs?: number;
  /** How long `tools()` waits for a server's very first connection (default 2 s); later calls never wait. */
  firstConnectWaitMs?: number;
  /** Reconnect backoff (default 1 s doubling to 60 s). */
  reconnect?: { initialMs?: number; maxMs?: number };
}

export interface McpToolProvider extends ToolProvider {
  readonly name: 'mcp';
  tools(persona: Persona): Promise<Tool[]>;
  /** Every declared server now: the global file's and those of the personas seen so far. */
  status(): McpStatus;
  /** Reads the personas' files, starts their servers and waits (at most `waitMs`, default 10 s) for them to connect. */
  check(personas: readonly Persona[], options?: { waitMs?: number }): Promise<McpStatus>;
  close(): Promise<void>;
}

interface Slot {
  key: string;
  entry: McpServerEntry;
  persona?: string;
  fingerprint?: string;
  connection?: McpConnection;
  /** Why it cannot be started (a secret it names is missing). */
  problem?: string;
  waited: boolean;
}

interface FileState {
  stamp: string;
  servers: McpServerEntry[];
  error?: string;
}

/** The two files a persona's servers come from, as read for one listing. */
interface PersonaFiles {
  global: FileState;
  own: FileState;
}

/** The runner's timeout is a backstop: the call's own (the server's timeoutSeconds) answers first, saying more. */
const RUNNER_MARGIN_MS = 5_000;

/**
 * MCP servers' tools as Parlor tools (`mcp_<server>_<tool>`), from the global `mcp.jsonc` and each persona's.
 * Servers connect on first use; a change to a file takes effect on the next `tools()` call.
 */
export function createMcpToolProvider(options: McpToolProviderOptions): McpToolProvider {
  const log = options.log ?? pino({ level: 'silent' });
  const env = options.env ?? {};
  const baseEnv = options.baseEnv ?? process.env;
  const timings: ConnectionTimings = {
    connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
    pingIntervalMs: options.pingIntervalMs ?? 30_000,
    backoffInitialMs: options.reconnect?.initialMs ?? 1_000,
    backoffMaxMs: options.reconnect?.maxMs ?? 60_000,
  };
  const firstConnectWaitMs = options.firstConnectWaitMs ?? 2_000;
  const readFile = createMcpFileReader();
  // The runner's settings, so that a schema accepted here compiles there too.
  const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false });
  const parameters = new WeakMap<ListedTool, Record<string, unknown>>();
  const built = new WeakMap<ListedTool, Map<string, Tool>>();
  const files = new Map<string, FileState>();
  const slots = new Map<string, Slot>();
  const personas = new Map<string, Persona>();
  let closed = false;
  // The MCP SDK is loaded when a persona first has a server to connect to: without one it costs nothing.
  let connections: typeof import('./connection.ts') | undefined;
  async function loadConnections(read: PersonaFiles): Promise<void> {
    if (connections || (read.global.servers.length === 0 && read.own.servers.length === 0)) return;
    connections = await import('./connection.ts');
  }

  const personaFile = (persona: Persona) => path.join(persona.dir, 'mcp.jsonc');
  /** The global file and the persona's, each looked at once for a listing (most turns find neither). */
  const filesOf = (persona: Persona): PersonaFiles => ({ global: load(options.globalFile), own: load(personaFile(persona)) });

  function load(file: string): FileState {
    const stamp = fileStamp(file);
    const cached = files.get(file);
    if (cached?.stamp === stamp) return cached;
    let state: FileState;
    try {
      state = { stamp, servers: readFile(file) };
    } catch (err) {
      // The servers it declared before keep running: a half-saved edit does not stop them.
      state = { stamp, servers: cached?.servers ?? [], error: (err as Error).message };
      log.warn({ file, err: state.error }, 'mcp.jsonc cannot be used');
    }
    files.set(file, state);
    return state;
  }

  function retire(drop: (slot: Slot) => boolean): void {
    for (const slot of [...slots.values()].filter(drop)) {
      slots.delete(slot.key);
      void slot.connection?.close();
    }
  }

  /** The persona's servers (its own, then the global ones it does not replace), connecting those that are new. */
  function sync(persona: Persona, read: PersonaFiles): Slot[] {
    personas.set(persona.name, persona);
    const global = read.global.servers;
    const own = read.own.servers;
    retire((s) => s.persona === undefined && !global.some((g) => g.name === s.entry.name));
    retire((s) => s.persona === persona.name && !own.some((o) => o.name === s.entry.name));
    const inherited = global.filter((g) => !own.some((o) => o.name === g.name));
    return [...own.map((e) => ensure(e, persona)), ...inherited.map((e) => ensure(e, undefined))];
  }

  function ensure(entry: McpServerEntry, persona: Persona | undefined): Slot {
    const key = persona ? `persona/${persona.name}/${entry.name}` : `global/${entry.name}`;
    const existing = slots.get(key);
    const source: SecretSource = persona
      ? { values: persona.secrets, missing: `is not in ${path.join(persona.dir, '.env')}` }
      : { values: env, missing: "is not set in Parlor's environment" };
    const secrets: string[] = [];
    let target: ServerTarget | undefined;
    let problem: string | undefined;
    if (!entry.disabled) {
      try {
        target = resolveTarget(entry, source, secrets);
      } catch (err) {
        problem = (err as Error).message;
      }
    }
    const fingerprint = target && createHash('sha256').update(JSON.stringify(target)).digest('hex');
    if (existing && existing.fingerprint === fingerprint && (existing.connection ? existing.connection.state !== 'closed' : !target)) {
      // allow, deny and timeoutSeconds apply to the next call without a reconnect.
      existing.entry = entry;
      existing.problem = problem;
      return existing;
    }
    void existing?.connection?.close();
    const slot: Slot = { key, entry, persona: persona?.name, fingerprint, problem, waited: false };
    if (target && connections) slot.connection = new connections.McpConnection(entry.name, target, { timings, baseEnv, log: log.child({ mcp: key }), secrets });
    slots.set(key, slot);
    return slot;
  }

  function toolsOf(slot: Slot, taken: Set<string>): Tool[] {
    const { entry, connection } = slot;
    if (!connection || entry.disabled) return [];
    const tools: Tool[] = [];
    for (const listed of connection.tools) {
      if (entry.allow && !listNames(entry.allow, entry.name, listed.name)) continue;
      if (listNames(entry.deny, entry.name, listed.name)) continue;
      let name = parlorToolName(entry.name, listed.name);
      if (taken.has(name)) name = distinctToolName(name, entry.name, listed.name);
      taken.add(name);
      tools.push(toolFor(slot, listed, name));
    }
    return tools;
  }

  /**
   * The same Tool object while nothing about it changes: the runner compiles a validator per Tool object, and a
   * refreshed tool list (or a changed timeout) makes new ones.
   */
  function toolFor(slot: Slot, listed: ListedTool, name: string): Tool {
    const { entry } = slot;
    const id = `${slot.key}|${name}|${entry.timeoutSeconds}`;
    let byId = built.get(listed);
    if (!byId) built.set(listed, (byId = new Map()));
    let tool = byId.get(id);
    if (!tool) {
      tool = {
        name,
        description: listed.description?.trim() || `${listed.name}, a tool of the MCP server "${entry.name}".`,
        group: 'mcp',
        server: entry.name,
        tier: 'search',
        parameters: parametersOf(listed, entry.name),
        timeoutMs: entry.timeoutSeconds * 1000 + RUNNER_MARGIN_MS,
        // A server's tool may act on the world: it asks first unless the persona allows it. What a server says of
        // its tools (a read-only hint) is not taken on trust.
        approval: { byDefault: true, summary: (args: unknown) => `${name} ${JSON.stringify(args)}`.slice(0, 300) },
        run: (args: unknown, ctx: ToolContext) => call(slot.key, entry.name, listed.name, args, ctx),
      };
      byId.set(id, tool);
    }
    return tool;
  }

  function parametersOf(listed: ListedTool, server: string): Record<string, unknown> {
    let known = parameters.get(listed);
    if (!known) {
      const shaped = toolParameters(listed.inputSchema, ajv);
      if (shaped.replaced) log.warn({ server, tool: listed.name }, 'MCP tool input schema does not compile; any object is accepted (the server checks)');
      known = shaped.parameters;
      parameters.set(listed, known);
    }
    return known;
  }

  async function call(key: string, server: string, tool: string, args: unknown, ctx: ToolContext): Promise<string> {
    const slot = slots.get(key);
    if (closed || !slot?.connection) return `error: MCP server "${server}" is no longer configured, so ${tool} did not run.`;
    return slot.connection.call(tool, args, { signal: ctx.signal, timeoutMs: slot.entry.timeoutSeconds * 1000 });
  }

  function describe(entry: McpServerEntry, slot: Slot | undefined, persona?: string, replacesGlobal?: boolean): McpServerStatus {
    const base = { name: entry.name, persona, file: entry.file, transport: entry.transport, replacesGlobal: replacesGlobal || undefined };
    if (entry.disabled) return { ...base, state: 'disabled', tools: [] };
    if (slot?.problem) return { ...base, state: 'down', error: slot.problem, tools: [] };
    if (!slot?.connection) return { ...base, state: 'idle', tools: [] };
    const snapshot = slot.connection.snapshot();
    const state = snapshot.state === 'closed' ? 'down' : snapshot.state;
    return { ...base, ...snapshot, state, tools: toolsOf(slot, new Set()).map((t) => t.name) };
  }

  function status(): McpStatus {
    const global = load(options.globalFile).servers;
    const servers = global.map((e) => describe(e, slots.get(`global/${e.name}`)));
    for (const persona of personas.values()) {
      for (const entry of load(personaFile(persona)).servers) {
        servers.push(describe(entry, slots.get(`persona/${persona.name}/${entry.name}`), persona.name, global.some((g) => g.name === entry.name)));
      }
    }
    const problems = [...files.entries()].filter(([, f]) => f.error).map(([file, f]) => ({ file, error: f.error! }));
    return { globalFile: options.globalFile, files: problems, servers };
  }

  return {
    name: 'mcp',
    async tools(persona) {
      if (closed) return [];
      try {
        const read = filesOf(persona);
        await loadConnections(read);
        const mine = sync(persona, read);
        const first = mine.filter((s) => s.connection && !s.connection.firstAttemptSettled && !s.waited);
        for (const slot of first) slot.waited = true;
        if (first.length) await settleWithin(Promise.allSettled(first.map((s) => s.connection!.firstAttempt)), firstConnectWaitMs);
        const taken = new Set<string>();
        return mine.flatMap((slot) => toolsOf(slot, taken));
      } catch (err) {
        log.error({ err, persona: persona.name }, 'MCP tools could not be listed');
        return [];
      }
    },
    status,
    async check(list, checkOptions = {}) {
      const deadline = Date.now() + (checkOptions.waitMs ?? 10_000);
      const read = list.map((persona) => ({ persona, files: filesOf(persona) }));
      for (const { files } of read) await loadConnections(files);
      const started = read.flatMap(({ persona, files }) => sync(persona, files));
      await Promise.all(started.map((slot) => slot.connection?.settle(Math.max(0, deadline - Date.now()))));
      return status();
    },
    async close() {
      closed = true;
      const all = [...slots.values()];
      slots.clear();
      await Promise.all(all.map((slot) => slot.connection?.close()));
    },
  };
}

function resolveTarget(entry: McpServerEntry, source: SecretSource, used: string[]): ServerTarget {
  const at = `${entry.file}: /servers/${entry.name}`;
  const resolveAll = (record: Record<string, string>, field: string) =>
    Object.fromEntries(Object.entries(record).map(([k, v]) => [k, resolveSecrets(v, source, `${at}/${field}/${k}`, used)]));
  if (entry.transport === 'http') return { transport: 'http', url: entry.url!, headers: resolveAll(entry.headers, 'headers') };
  return { transport: 'stdio', command: entry.command!, args: entry.args, env: resolveAll(entry.env, 'env'), cwd: entry.cwd };
}

/** Changes when the file is saved again (or appears, or goes). */
function fileStamp(file: string): string {
  try {
    // Most turns find no file: undefined is cheaper than the error it would throw.
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    return stat ? `${stat.mtimeMs}:${stat.ctimeMs}:${stat.size}:${stat.ino}` : 'absent:ENOENT';
  } catch (err) {
    return `absent:${(err as NodeJS.ErrnoException).code}`;
  }
}
