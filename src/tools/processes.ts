// Commands left running in the background: shell_exec moves a command here when it is still running after its
// yield (or at once with `background: true`), the `process` tool reads, writes and signals it, and when it ends its
// conversation gets one wake turn with its exit status and the tail of its output. Output lives in the Parlor
// process that runs the command; what it is and how it ended are in Postgres (a ProcessStore), so every process
// sees its state and a Parlor process that dies leaves no process running unnoticed.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Origin } from '#src/turns.ts';

/** Bytes of output a wake shows. */
export const WAKE_TAIL_BYTES = 2_000;
/** Bytes one `process read` returns at most. */
export const READ_MAX_BYTES = 16_384;
const KILL_WAIT_MS = 5_000;

/** What the registry needs of a started command (shell-process.ts's StartedCommand). */
export interface BackgroundCommand {
  output: {
    total: number;
    readonly start: number;
    read(since: number, maxBytes: number): { text: string; from: number; next: number; dropped: number };
    tail(maxBytes: number): string;
  };
  exited: Promise<{ status: string; notes: string[]; startError?: string; durationMs: number }>;
  readonly running: boolean;
  readonly startedAt: number;
  readonly tag?: string;
  stop(why: 'killed'): void;
  signal(signal: NodeJS.Signals): void;
  write(data: string, end?: boolean): boolean;
}

export interface ProcessOwner {
  persona: string;
  conversationId: string;
  turnId?: string;
  origin?: Origin;
}

export interface ProcessRecord extends ProcessOwner {
  id: string;
  command: string;
  state: 'running' | 'exited' | 'killed' | 'lost';
  exitStatus?: string;
  tail?: string;
  startedAt: Date;
  endedAt?: Date;
  removed?: boolean;
}

/** Where processes are recorded, and how the wake turn of one that ended is sent. */
export interface ProcessStore {
  /** Records a process about to go to the background unless the persona has `max` running already: whether it did. */
  admit(record: ProcessRecord & { tag?: string }, max: number): Promise<boolean>;
  /**
   * Records how it ended and sends its conversation the wake with `text`, once (a second call does nothing); no wake
   * when none is given (stopped by /stop).
   */
  ended(id: string, end: { state: 'exited' | 'killed'; exitStatus: string; tail: string }, wake?: { owner: ProcessOwner; text: string }): Promise<void>;
  /** Passes a request to the Parlor processes that run background commands (the one that runs it acts). */
  forward?(request: ProcessRequest): Promise<void>;
  removed(id: string): Promise<void>;
  get(id: string): Promise<ProcessRecord | undefined>;
  list(conversationId: string): Promise<ProcessRecord[]>;
}

interface Entry {
  record: ProcessRecord;
  command: BackgroundCommand;
  ended?: Promise<void>;
  /** Stopped by /stop: its end sends no wake. */
  quiet?: boolean;
}

/** What one Parlor process asks of the one that runs a command. */
export type ProcessRequest = { signal: { id: string; signal: NodeJS.Signals } } | { stopConversation: string };

/** The view of a turn's tools: its persona and conversation. */
export type ProcessCaller = ProcessOwner;

export class ProcessRegistry {
  private readonly local = new Map<string, Entry>();
  /** Admissions under way (stopAll waits for them). */
  private readonly admitting = new Set<Promise<void>>();
  private store: ProcessStore;
  private stopping = false;

  constructor(
    private readonly log: Logger,
    store?: ProcessStore,
  ) {
    this.store = store ?? memoryStore();
  }

  /** Records in Postgres from now on (start-up, once the database is there). */
  attach(store: ProcessStore): void {
    this.store = store;
  }

  /**
   * Takes a running command into the background: its handle, or why it cannot go (the persona's limit, a shutdown).
   * From here its end is recorded and wakes the conversation.
   */
  async adopt(command: BackgroundCommand, owner: ProcessOwner & { command: string; max: number }): Promise<{ id: string } | { refused: string }> {
    if (this.stopping) return { refused: 'Parlor is shutting down' };
    if (owner.max <= 0) return { refused: 'background commands are off for this persona (tools.jsonc "processes": {"max": 0})' };
    const id = `bg_${randomBytes(4).toString('hex')}`;
    const record: ProcessRecord = {
      id,
      persona: owner.persona,
      conversationId: owner.conversationId,
      turnId: owner.turnId,
      origin: owner.origin,
      command: owner.command,
      state: 'running',
      startedAt: new Date(command.startedAt),
    };
    let admitted: boolean;
    const admitting = this.store.admit({ ...record, ...(command.tag ? { tag: command.tag } : {}) }, owner.max);
    const settled = admitting.then(
      () => {},
      () => {},
    );
    this.admitting.add(settled);
    try {
      admitted = await admitting;
    } catch (err) {
      this.log.error({ err }, 'a background command could not be recorded');
      return { refused: 'it could not be recorded (the database did not answer)' };
    } finally {
      this.admitting.delete(settled);
    }
    if (!admitted) return { refused: `${owner.max} background command${owner.max === 1 ? ' is' : 's are'} running already (stop one with process signal, or wait)` };
    const entry: Entry = { record, command };
    this.local.set(id, entry);
    entry.ended = command.exited.then(async (exit) => {
      const status = exit.startError !== undefined ? 'error' : exit.status;
      const tail = command.output.tail(WAKE_TAIL_BYTES).replace(/\n$/, '');
      const state = status === 'killed' ? 'killed' : 'exited';
      Object.assign(record, { state, exitStatus: `exit=${status}`, tail, endedAt: new Date() });
      const text = wakeText(record, exit.durationMs, [...exit.notes, ...(exit.startError ? [exit.startError] : [])], this.stopping);
      await this.store.ended(id, { state, exitStatus: `exit=${status}`, tail }, entry.quiet ? undefined : { owner: record, text }).catch((err: unknown) => {
        this.log.error({ err, process: id }, 'the end of a background command could not be recorded');
      });
      this.log.info({ process: id, status }, 'background command ended');
    });
    this.log.info({ process: id, persona: owner.persona, conversation: owner.conversationId }, 'command moved to the background');
    // Shutdown began while it was being recorded: it stops with the rest (and its conversation is told).
    if (this.stopping) command.stop('killed');
    return { id };
  }

  /** One process of the caller's conversation, or all of them: one line each. */
  async status(caller: ProcessCaller, id?: string): Promise<string> {
    if (id) {
      const found = await this.find(caller, id);
      if ('error' in found) return found.error;
      return describe(found.record);
    }
    const records = (await this.store.list(caller.conversationId)).filter((r) => r.persona === caller.persona);
    if (records.length === 0) return 'No background commands in this conversation.';
    return records.map((r) => describe(this.local.get(r.id)?.record ?? r)).join('\n');
  }

  /** Output from byte offset `since` (the start of what is still held when absent), at most READ_MAX_BYTES. */
  async read(caller: ProcessCaller, id: string, since?: number): Promise<string> {
    const found = await this.find(caller, id);
    if ('error' in found) return found.error;
    if (!found.entry) {
      const { record } = found;
      if (record.state === 'running') return `${id} runs in another Parlor process; its output can be read there, and its status here (process status).`;
      return [describe(record), 'Last output (the rest is gone with the process that ran it):', record.tail || '(no output)'].join('\n');
    }
    const output = found.entry.command.output;
    const part = output.read(since ?? output.start, READ_MAX_BYTES);
    const lines = [`${describe(found.record)}`, `bytes ${part.from}-${part.next} of ${output.total}${part.dropped ? `; dropped_bytes=${part.dropped} (older output is no longer kept)` : ''}`];
    lines.push(part.text.replace(/\n$/, '') || '(no new output)');
    if (part.next < output.total) lines.push(`[more output: call process read with since=${part.next}]`);
    return lines.join('\n');
  }

  async write(caller: ProcessCaller, id: string, data: string, end: boolean): Promise<string> {
    const found = await this.find(caller, id);
    if ('error' in found) return found.error;
    if (!found.entry) return `${id} is not running in this Parlor process, so nothing can be written to it from here.`;
    if (!found.entry.command.running) return `${id} has ended (${found.record.exitStatus ?? 'exit'}); nothing was written.`;
    if (!found.entry.command.write(data, end)) {
      return `${id} has no input open: only a command started with shell_exec background=true keeps its stdin${end ? '' : ' (or its input was closed)'}; nothing was written.`;
    }
    return `wrote ${Buffer.byteLength(data)} bytes to ${id}${end ? ' and closed its input' : ''}`;
  }

  /** Sends a signal to the whole process tree (SIGTERM and SIGKILL end it: SIGTERM, then SIGKILL after a grace period). */
  async signal(caller: ProcessCaller, id: string, signal: NodeJS.Signals): Promise<string> {
    const found = await this.find(caller, id);
    if ('error' in found) return found.error;
    if (!found.entry) {
      if (found.record.state !== 'running') return `${id} has ended already (${found.record.exitStatus}).`;
      if (!this.store.forward) return `${id} runs in another Parlor process; signal it there.`;
      await this.store.forward({ signal: { id, signal } });
      return `sent ${signal} to ${id}, which runs in another Parlor process (process status shows when it has ended)`;
    }
    if (!found.entry.command.running) return `${id} has ended already (${found.record.exitStatus}).`;
    found.entry.command.signal(signal);
    if (signal !== 'SIGTERM' && signal !== 'SIGKILL') return `sent ${signal} to ${id} and the processes it started`;
    await withTimeout(found.entry.ended, KILL_WAIT_MS);
    return found.entry.command.running ? `sent ${signal} to ${id}; it is still stopping` : `stopped ${id} (${found.record.exitStatus})`;
  }

  /** Stops a process if it runs, and forgets it: no longer listed, and no wake when it was still running. */
  async remove(caller: ProcessCaller, id: string): Promise<string> {
    const found = await this.find(caller, id);
    if ('error' in found) return found.error;
    if (found.entry?.command.running) {
      // Removed first, so its end sends no wake.
      await this.store.removed(id);
      found.entry.command.stop('killed');
      await withTimeout(found.entry.ended, KILL_WAIT_MS);
    } else if (!found.entry && found.record.state === 'running') {
      return `${id} runs in another Parlor process; stop it there first.`;
    } else {
      await this.store.removed(id);
    }
    this.local.delete(id);
    return `removed ${id}`;
  }

  /** Stops a process (task_cancel). */
  async cancel(caller: ProcessCaller, id: string): Promise<string> {
    return this.signal(caller, id, 'SIGTERM');
  }

  /**
   * Stops a conversation's commands without a wake (the chat's /stop), here and, through the store, in the other
   * Parlor processes: how many were running.
   */
  async stopConversation(conversationId: string): Promise<number> {
    const records = await this.store.list(conversationId).catch(() => [] as ProcessRecord[]);
    const running = records.filter((r) => r.state === 'running').length;
    this.stopLocal(conversationId);
    if (running > 0) await this.store.forward?.({ stopConversation: conversationId });
    return running;
  }

  /** Carries out a request another Parlor process forwarded, for the commands this one runs. */
  handle(request: ProcessRequest): void {
    if ('stopConversation' in request) this.stopLocal(request.stopConversation);
    else {
      const entry = this.local.get(request.signal.id);
      if (entry?.command.running) entry.command.signal(request.signal.signal);
    }
  }

  private stopLocal(conversationId: string): void {
    for (const entry of this.local.values()) {
      if (entry.record.conversationId !== conversationId || !entry.command.running) continue;
      entry.quiet = true;
      entry.command.stop('killed');
    }
  }

  /** Stops every process this Parlor process runs (shutdown); each one's conversation is told. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    // Commands on their way to the background are recorded first, so that they are stopped here too.
    await withTimeout(Promise.all(this.admitting).then(() => {}), KILL_WAIT_MS);
    const running = [...this.local.values()].filter((e) => e.command.running);
    for (const entry of running) entry.command.stop('killed');
    await Promise.all(running.map((e) => withTimeout(e.ended, KILL_WAIT_MS)));
    if (running.length) this.log.info({ processes: running.map((e) => e.record.id) }, 'background commands stopped');
  }

  private async find(caller: ProcessCaller, id: string): Promise<{ record: ProcessRecord; entry?: Entry } | { error: string }> {
    const entry = this.local.get(id);
    const record = entry?.record ?? (await this.store.get(id));
    // Another conversation's process is as unknown as one that never was.
    if (!record || record.removed || record.conversationId !== caller.conversationId || record.persona !== caller.persona) {
      return { error: `error: there is no background command ${id} in this conversation (process list shows them)` };
    }
    return { record, entry };
  }
}

function describe(record: ProcessRecord): string {
  const ran = formatDuration((record.endedAt ?? new Date()).getTime() - record.startedAt.getTime());
  const state = record.state === 'running' ? `running for ${ran}` : record.state === 'lost' ? `lost (its Parlor process ended) after ${ran}` : `${record.exitStatus} after ${ran}`;
  return `${record.id}  ${state}  ${oneLine(record.command)}`;
}

/** The wake turn's text: what ended, how, and the tail of its output. */
export function wakeText(record: ProcessRecord, durationMs: number, notes: readonly string[], shutdown = false): string {
  const how = shutdown ? 'was stopped because Parlor shut down' : `finished with ${record.exitStatus}`;
  return [
    `[background command] ${record.id} ${how} after ${formatDuration(durationMs)}: ${oneLine(record.command)}`,
    ...notes,
    'Last output:',
    record.tail || '(no output)',
  ].join('\n');
}

export function lostText(record: Pick<ProcessRecord, 'id' | 'command'>): string {
  return `[background command] ${record.id} was stopped: the Parlor process that ran it ended (a restart or a crash), so its result is unknown. Run it again if it is still needed: ${oneLine(record.command)}`;
}

function oneLine(command: string): string {
  const line = command.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

async function withTimeout(promise: Promise<void> | undefined, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** A store in memory, for a ToolRunner without a database: wakes go to `onWake` when given. */
export function memoryStore(onWake?: (owner: ProcessOwner, text: string) => void): ProcessStore {
  const records = new Map<string, ProcessRecord>();
  return {
    async admit(record, max) {
      const running = [...records.values()].filter((r) => r.persona === record.persona && r.state === 'running').length;
      if (running >= max) return false;
      records.set(record.id, { ...record });
      return true;
    },
    async ended(id, end, wake) {
      const record = records.get(id);
      if (!record || record.state !== 'running') return;
      Object.assign(record, end, { endedAt: new Date() });
      if (!record.removed && wake) onWake?.(wake.owner, wake.text);
    },
    async removed(id) {
      const record = records.get(id);
      if (record) record.removed = true;
    },
    async get(id) {
      return records.get(id);
    },
    async list(conversationId) {
      return [...records.values()].filter((r) => r.conversationId === conversationId && !r.removed).reverse();
    },
  };
}
