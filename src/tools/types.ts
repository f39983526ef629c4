import type { Logger } from 'pino';
import type { Persona, ScheduleEntry } from '#src/config/persona.ts';
import type { DeliveryResult, DeliveryTarget, Origin, TurnKind } from '#src/turns.ts';

export interface ToolContext {
  persona: Persona;
  conversationId: string;
  turnId: string;
  kind: TurnKind;
  origin?: Origin;
  signal: AbortSignal;
  log: Logger;
  /** Secret values masked in tool output besides the persona's (a task's persona has none, its owner's are masked). */
  maskSecrets?: readonly string[];
  /** Sends text to a chat through the outbound ledger (at most once per turn and destination). */
  deliver(target: DeliveryTarget, text: string, options?: { dedupe?: string; files?: string[] }): Promise<DeliveryResult>;
  /** Connectors running anywhere in this deployment. */
  connectorIds(): string[];
  /**
   * Asks a person (buttons in the turn's chat, the HTTP API) and resolves with the chosen value; rejects when
   * nobody answers in time or the turn stops.
   */
  remoteMethod(request: RemoteMethodRequest): Promise<unknown>;
  /** Persists and shows an `ask_user` question; its answer arrives later as a message in this conversation. */
  askUser(request: { question: string; choices: ChoiceSpec[]; expiresInMs: number; destination: DeliveryTarget }): Promise<{ id: string; short: string }>;
  /** Messages to other personas (send_to_persona, ask_persona); absent where they are not available. */
  personaMail?: PersonaMailApi;
  /** Background tasks (spawn_subagent, task_status, task_cancel); absent where they are not available. */
  subagents?: SubagentsApi;
  /** Wake-ups, reminders and schedules; absent where no scheduler runs. */
  scheduling?: SchedulingApi;
  /** Where a scheduled turn's `reply_to_origin` delivers: the captured target, else the origin chat. */
  replyTarget?: DeliveryTarget;
  /**
   * Reacts with a Unicode emoji to a message in the turn's chat (the triggering message when none is named):
   * `done`, or `queued` for the process that runs the chat's connector.
   */
  react(emoji: string, messageId?: string): Promise<'done' | 'queued'>;
  /** The turn's search-tier tools (custom, MCP): found by tool_search, made callable by tool_activate. */
  tiers?: ToolTiersApi;
  /**
   * This call as a key of its own: its turn, the model's id for it and its arguments (some servers number calls
   * afresh in every response, "call_0"). The same when a resumed turn runs a `resumable` call again.
   */
  callKey?: string;
}

export interface ToolTiersApi {
  /** Search-tier tools whose name or description has the query's words, best first. */
  search(query: string, limit: number): Tool[];
  /** How many search-tier tools the turn has. */
  count(): number;
  /** Makes the tool callable from the next model call, for the rest of the conversation (until /new). */
  activate(name: string): Promise<{ tool: Tool; already?: true; evicted?: string } | { error: string }>;
}

export interface PersonaMailApi {
  send(persona: string, text: string): Promise<{ sent: true } | { error: string }>;
  /** Waits for the reply up to `timeoutMs`; `pending` when it did not come in time (it goes to the inbox then). */
  ask(persona: string, text: string, timeoutMs: number, signal: AbortSignal): Promise<{ reply: string } | { pending: true } | { error: string }>;
}

export interface SubagentsApi {
  /** Starts a task in the background: its handle at once (and whether it waits for a free place), or why not. */
  spawn(args: { task: string; tools?: string[]; label?: string }): Promise<{ handle: string; queued: boolean } | { error: string }>;
  /** The conversation's tasks (or one), one line each. */
  status(handle?: string): Promise<string>;
  /** Cancels a task, or `all` of the conversation's unfinished ones. */
  cancel(which: string): Promise<string>;
}

/** A choice offered to a person: its label, and the value the tool receives (the label when absent). */
export type ChoiceSpec = string | { label: string; value?: unknown };

export interface RemoteMethodRequest {
  /** What is being asked (`pick_file`, `confirm_deploy`...); shown on the HTTP API. */
  method: string;
  data?: unknown;
  /** Offered as buttons (at most 5); without choices only a typed reply or the API can answer. */
  choices?: ChoiceSpec[];
  /** Rejected with a timeout error after this long (default 120 s). */
  timeoutMs?: number;
  /** The chat text; a summary of method and data when absent. */
  text?: string;
  /** Stops waiting when it aborts (the calling tool's signal, by default). */
  signal?: AbortSignal;
}

export interface ScheduleView extends ScheduleEntry {
  paused: boolean;
  /** ISO time of the next occurrence, in UTC. */
  nextRun?: string;
}

export interface ReminderView {
  name: string;
  kind: 'reminder' | 'wakeup';
  prompt: string;
  dueAt: string;
  everySeconds?: number;
  until?: string;
  deliver?: DeliveryTarget;
  fires: number;
}

/** Scheduling for the turn's persona and conversation: wake-ups, reminders and `schedules.jsonc` entries. */
export interface SchedulingApi {
  /** Replaces this conversation's wake-up; `delayMs` 0 cancels it. */
  wakeup(request: { delayMs: number; message?: string; loop?: boolean }): Promise<{ dueAt?: Date; replaced: boolean }>;
  /** `callKey`: the reminder the call with this key set already is returned instead of a second one. */
  remind(request: { name: string; prompt: string; dueAt: Date; everySeconds?: number; until?: Date; deliver?: DeliveryTarget; callKey?: string }): Promise<ReminderView>;
  cancelReminder(name: string): Promise<boolean>;
  /** `onlyOwn`: the asker is not one of the persona's people, and sees only the reminders they set. */
  list(): Promise<{ schedules: ScheduleView[]; reminders: ReminderView[]; onlyOwn?: boolean }>;
  addSchedule(entry: ScheduleEntry): Promise<ScheduleView>;
  updateSchedule(name: string, patch: Partial<ScheduleEntry>): Promise<ScheduleView>;
  removeSchedule(name: string): Promise<void>;
  runNow(name: string): Promise<void>;
  /** Holds (or releases) one entry's runs, or all of the persona's when no name is given. */
  pause(name?: string): Promise<void>;
  resume(name?: string): Promise<void>;
}

/** What a tool may tell the loop besides its text result. */
export interface ToolOutput {
  content: string;
  /** End the turn after this call (end_task, a successful ask_user). */
  endTurn?: { status: 'ok' | 'skipped' | 'failed'; summary?: string };
  /** Think harder on the following model calls of this turn. */
  thinking?: boolean;
}

/**
 * What a tool is about, for `group:<name>` in a persona's deny, allow and approve lists. `mcp` tools are also in
 * `group:mcp:<server>`; `other` is in no group a persona can name.
 */
export type ToolGroup = 'fs' | 'web' | 'runtime' | 'memory' | 'messaging' | 'agents' | 'schedule' | 'mcp' | 'custom' | 'other';

export interface Tool<Args = any> {
  /** The model-facing snake_case name. */
  name: string;
  description: string;
  /** Its group (see ToolGroup); built-ins say theirs, custom tools are `custom`, MCP tools `mcp`. */
  group?: ToolGroup;
  /** For an MCP tool: the server it comes from (`group:mcp:<server>`). */
  server?: string;
  /**
   * `search`: the system prompt lists its name and first line only, and it is callable once `tool_activate` has
   * activated it (custom and MCP tools). Built-ins are `core`: their whole schema is in every call.
   */
  tier?: 'core' | 'search';
  /** JSON Schema of the arguments (validated with ajv before `run`). */
  parameters: Record<string, unknown>;
  /** Turn kinds the tool is offered in; all when absent. */
  contexts?: readonly TurnKind[];
  timeoutMs?: number;
  /** Exempt from the repeated-call guard (polling tools, say). */
  allowRepeat?: boolean;
  /**
   * A call of it may be run again with the same `callKey` to no further effect (what it does is keyed by the call).
   * A turn resumed after a crash runs such a call again, instead of telling the model it was interrupted
   * (which leaves the model to guess whether it took effect, and often to do it twice).
   */
  resumable?(args: Args): boolean;
  available?(context: { persona: Persona; kind: TurnKind }): boolean;
  /** How an approval question shows a call, and what "Always allow" covers (the whole tool when absent). */
  approval?: {
    summary?(args: Args): string;
    /** The part of the call an "Always allow" grant is for (`shell_exec`: the exact command). */
    scope?(args: Args): string;
    /** A reason to refuse the call before anyone is asked (a catastrophic command), or undefined. */
    refuse?(args: Args): string | undefined;
    /**
     * The tool acts on the machine or the outside world: it asks first unless the persona lists it under `allow`
     * (as well as when it is under `approve`).
     */
    byDefault?: boolean;
  };
  run(args: Args, ctx: ToolContext): Promise<string | ToolOutput>;
}

/**
 * Tools that come and go while Parlor runs (custom tool folders, MCP servers): asked for the persona's tools at the
 * start of every turn, so a change takes effect on the next turn without a restart.
 */
export interface ToolProvider {
  /** For logs and `parlor doctor`: `custom`, `mcp`. */
  readonly name: string;
  /** The persona's tools now. Never throws: a broken source is logged and left out. */
  tools(persona: Persona): Tool[] | Promise<Tool[]>;
  /** Stops what the provider runs (MCP server processes and connections). */
  close?(): Promise<void>;
}
