import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import type { Readable } from 'node:stream';
import { SANDBOX_STARTED_FD } from '#src/tools/sandbox.ts';
import { withReaper } from './shell-reaper.ts';
import { formatSeconds } from './shell-summary.ts';

export const MAX_OUTPUT_BYTES = 16_384;
// Between SIGTERM and SIGKILL.
const KILL_GRACE_MS = 1_000;
// What a reaper gets on top, to kill and collect what the command left.
const REAPER_GRACE_MS = 2_000;
const POLL_MS = 50;
// How long to keep reading after the command is over, for a process that escaped and still holds the output pipe.
const DRAIN_AFTER_EXIT_MS = 1_000;
// Set in the environment of a command run outside bubblewrap so that what it leaves behind can be found (see killTree).
const RUN_TAG = 'PARLOR_SHELL_RUN';

export interface RunOptions {
  /** The program to start: bubblewrap with its arguments, or /bin/sh directly. */
  file: string;
  args: string[];
  /**
   * True when `file` and `args` are sandboxedCommand's: the command is pid 2 of its own PID namespace, and says on
   * SANDBOX_STARTED_FD that it started.
   */
  sandboxed: boolean;
  /**
   * For a sandboxed command: its arguments made afresh, for a second run when the first never started the command
   * (bubblewrap could not set the sandbox up, see sandboxedCommand).
   */
  again?: () => { file: string; args: string[] } | undefined;
  /**
   * The user to run as instead of Parlor's own (Parlor being root). The command enters `cwd` first, as root, so it
   * starts there even when the folders above it are closed to that user.
   */
  user?: { uid: number; gid: number };
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
  /** Keep the command's stdin open for `write` (otherwise it reads end-of-file at once). */
  keepInput?: boolean;
  /** Keep stderr out of `output`, in `errors` (a custom tool's result is its stdout alone). */
  separateStderr?: boolean;
}

/** How a command ended, once nothing it started can still be running. */
export interface CommandExit {
  /** `0`, `1`, `signal SIGTERM`, `timeout`, `cancelled`, `killed`, or `error` when it could not start. */
  status: string;
  /** Lines said after the output: truncation, how it was killed. */
  notes: string[];
  /** When it could not be started: why. */
  startError?: string;
  durationMs: number;
}

/**
 * A command's combined output: the first `headBytes` as they came (a command's result), and a rolling window of the
 * last `windowBytes` addressed by byte offsets from the start (what `process read` pages through).
 */
export class OutputBuffer {
  private readonly head: Buffer[] = [];
  private headLength = 0;
  private window: Buffer[] = [];
  private windowLength = 0;
  /** Bytes the command has written in all. */
  total = 0;

  constructor(
    private readonly headBytes = MAX_OUTPUT_BYTES,
    private readonly windowBytes = 256 * 1024,
  ) {}

  push(bytes: Buffer): void {
    this.total += bytes.length;
    const room = this.headBytes - this.headLength;
    if (room > 0) {
      const part = bytes.length > room ? bytes.subarray(0, room) : bytes;
      this.head.push(part);
      this.headLength += part.length;
    }
    this.window.push(bytes);
    this.windowLength += bytes.length;
    while (this.windowLength - (this.window[0]?.length ?? 0) >= this.windowBytes) this.windowLength -= this.window.shift()!.length;
  }

  /** The first bytes, and how many more there were. */
  headText(): { text: string; dropped: number } {
    return { text: Buffer.concat(this.head).toString('utf8'), dropped: this.total - this.headLength };
  }

  /** Offset of the first byte still held. */
  get start(): number {
    return this.total - this.windowLength;
  }

  /**
   * Up to `maxBytes` from offset `since`: `dropped` counts the bytes between `since` and the oldest byte still held
   * (gone from the window), `next` is the offset to read from next.
   */
  read(since: number, maxBytes: number): { text: string; from: number; next: number; dropped: number } {
    const from = Math.min(Math.max(since, this.start), this.total);
    const all = Buffer.concat(this.window);
    const slice = all.subarray(from - this.start, Math.min(from - this.start + maxBytes, all.length));
    return { text: slice.toString('utf8'), from, next: from + slice.length, dropped: Math.max(0, this.start - since) };
  }

  /** The last `maxBytes` (the tail a wake shows). */
  tail(maxBytes: number): string {
    return this.read(Math.max(0, this.total - maxBytes), maxBytes).text;
  }
}

/** A command that was started: its output so far, and how it ended once it has. */
export interface StartedCommand {
  output: OutputBuffer;
  /** Its stderr, with `separateStderr` (otherwise stderr is in `output`). */
  errors?: OutputBuffer;
  /** Resolves once the command is over and nothing it started still runs. */
  exited: Promise<CommandExit>;
  readonly running: boolean;
  readonly startedAt: number;
  /** Set in the environment of a command run outside the sandbox: what killTagged finds it by after a crash. */
  readonly tag?: string;
  /** Ends the command and everything it started (SIGTERM, then SIGKILL after a grace period). */
  stop(why: 'timeout' | 'cancelled' | 'killed'): void;
  /** Sends a signal to the command's whole tree (SIGTERM and SIGKILL: `stop('killed')`). */
  signal(signal: NodeJS.Signals): void;
  /** Writes to its stdin; false when it has none open. `end` closes it afterwards. */
  write(data: string, end?: boolean): boolean;
  /** It no longer stops with the turn that started it, and is stopped `timeoutMs` after it started instead. */
  detach(timeoutMs: number): void;
}

/**
 * Starts a command whose output is counted and kept (see OutputBuffer), not piled up: a command printing gigabytes
 * costs no memory. In the sandbox the command's PID namespace ends with it, taking `sleep 1000 &` and `setsid ...`
 * along; run directly (as Parlor's user or a user of its own), its process group and every process carrying its tag
 * are killed when it ends or is stopped.
 */
export async function startCommand(options: RunOptions): Promise<StartedCommand> {
  const first = await startOnce(options);
  if (!options.again || (await first.started)) return first.command;
  // Never started: what it said is bubblewrap's. When bubblewrap gave up (status 1; not a timeout, not the turn
  // stopping), once more on fresh arguments.
  const exit = await first.command.exited;
  const fresh = exit.status === '1' && !options.signal.aborted ? options.again() : undefined;
  return fresh ? (await startOnce({ ...options, ...fresh, again: undefined })).command : first.command;
}

async function startOnce(options: RunOptions): Promise<{ command: StartedCommand; started: Promise<boolean> }> {
  // Loaded with the first command (execa is a hundred modules): a process whose personas run none never holds it.
  const { execa } = await import('execa');
  const tag = randomBytes(12).toString('hex');
  const startedAt = Date.now();
  // Outside the sandbox, a reaper in front of the command keeps whatever it starts findable (shell-reaper.ts).
  const reaped = options.sandboxed ? undefined : withReaper(options.file, options.args);
  const subprocess = execa(reaped?.file ?? options.file, reaped?.args ?? options.args, {
    cwd: options.cwd,
    env: options.sandboxed ? options.env : { ...options.env, [RUN_TAG]: tag },
    extendEnv: false,
    // Node drops the supplementary groups (root's) before switching.
    ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    // Its own process group, so the whole tree can be signalled at once through -pid.
    detached: true,
    stdio: [options.keepInput ? 'pipe' : 'ignore', 'pipe', 'pipe', ...(options.sandboxed ? ['pipe' as const] : [])],
    all: !options.separateStderr,
    buffer: false,
    reject: false,
  });
  subprocess.stdin?.on('error', () => {});
  const said = options.sandboxed ? (subprocess.stdio[SANDBOX_STARTED_FD] as Readable | undefined) : undefined;
  const started = said
    ? new Promise<boolean>((resolve) => {
        said.once('data', () => resolve(true));
        said.once('close', () => resolve(false));
        said.once('error', () => resolve(false));
      })
    : Promise.resolve(true);

  let stopped: 'timeout' | 'cancelled' | 'killed' | undefined;
  let cleanedUp: Promise<void> | undefined;
  const cleanUp = () => {
    if (cleanedUp || subprocess.pid === undefined) return;
    cleanedUp = killTree(subprocess.pid, options.sandboxed ? undefined : tag, reaped !== undefined);
  };
  let exited = false;
  const stop = (why: 'timeout' | 'cancelled' | 'killed') => {
    if (stopped || exited) return;
    stopped = why;
    cleanUp();
  };
  let limitMs = options.timeoutMs;
  let timer = setTimeout(() => stop('timeout'), limitMs);
  const onAbort = () => stop('cancelled');
  options.signal.addEventListener('abort', onAbort, { once: true });
  if (options.signal.aborted) stop('cancelled');

  let abandonedOutput = false;
  let drainTimer: NodeJS.Timeout | undefined;
  subprocess.once('exit', () => {
    exited = true;
    // The command is over: what it left running goes too (in the sandbox, its PID namespace has already taken it).
    if (!options.sandboxed) cleanUp();
    drainTimer = setTimeout(() => {
      abandonedOutput = true;
      subprocess.all?.destroy();
      subprocess.stdout?.destroy();
      subprocess.stderr?.destroy();
    }, KILL_GRACE_MS + DRAIN_AFTER_EXIT_MS);
  });

  const output = new OutputBuffer();
  const errors = options.separateStderr ? new OutputBuffer(MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES) : undefined;
  const finished = (async (): Promise<CommandExit> => {
    await Promise.all(errors ? [collect(subprocess.stdout, output), collect(subprocess.stderr, errors)] : [collect(subprocess.all, output)]);
    const result = await subprocess;
    clearTimeout(timer);
    clearTimeout(drainTimer);
    options.signal.removeEventListener('abort', onAbort);
    await cleanedUp;
    const durationMs = Date.now() - startedAt;
    if (result.exitCode === undefined && result.signal === undefined && !stopped) {
      return { status: 'error', notes: [], startError: result.shortMessage, durationMs };
    }
    const signal = result.signal ?? (options.sandboxed ? signalFromStatus(result.exitCode) : undefined);
    const notes: string[] = [];
    let status: string;
    if (stopped === 'timeout') {
      status = 'timeout';
      notes.push(`[killed after ${formatSeconds(limitMs)}: timed out]`);
    } else if (stopped === 'cancelled') {
      status = 'cancelled';
      notes.push('[killed: the turn was stopped]');
    } else if (stopped === 'killed') {
      status = 'killed';
      notes.push('[killed on request]');
    } else if (signal) {
      status = `signal ${signal}`;
      notes.push(`[killed by signal ${signal}]`);
    } else {
      status = String(result.exitCode);
    }
    if (abandonedOutput) notes.push('[stopped reading: a background process still held the output]');
    return { status, notes, durationMs };
  })();

  const command: StartedCommand = {
    output,
    ...(errors ? { errors } : {}),
    exited: finished,
    startedAt,
    ...(options.sandboxed ? {} : { tag }),
    get running() {
      return !exited;
    },
    stop,
    signal(signal) {
      if (signal === 'SIGTERM' || signal === 'SIGKILL') return stop('killed');
      if (exited || subprocess.pid === undefined) return;
      signalGroup(subprocess.pid, signal);
      for (const pid of options.sandboxed ? [] : liveProcesses(subprocess.pid, tag)) signalProcess(pid, signal);
    },
    write(data, end) {
      const stdin = subprocess.stdin;
      if (!stdin || stdin.destroyed || stdin.writableEnded || exited) return false;
      stdin.write(data);
      if (end) stdin.end();
      return true;
    },
    detach(timeoutMs) {
      options.signal.removeEventListener('abort', onAbort);
      clearTimeout(timer);
      limitMs = timeoutMs;
      timer = setTimeout(() => stop('timeout'), Math.max(0, startedAt + timeoutMs - Date.now()));
    },
  };
  return { command, started };
}

async function collect(stream: AsyncIterable<unknown> | null | undefined, into: OutputBuffer): Promise<void> {
  try {
    for await (const chunk of stream ?? []) into.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  } catch {
    // Destroyed (see the drain timer), or the pipe broke: what was read so far is the output.
  }
}

/** A finished command as the model reads it: `exit=<status>`, its output (the first MAX_OUTPUT_BYTES), notes. */
export function formatCommandResult(exit: CommandExit, output: OutputBuffer): string {
  if (exit.startError !== undefined) return `error: the command could not be started: ${exit.startError}`;
  const { text, dropped } = output.headText();
  const notes = [...exit.notes];
  if (dropped > 0) notes.unshift(`[output truncated: ${dropped} more bytes]`);
  return [`exit=${exit.status}`, text.replace(/\n$/, '') || '(no output)', ...notes].join('\n');
}

/** Runs a command to its end and reports it (formatCommandResult). */
export async function runCommand(options: RunOptions): Promise<string> {
  const command = await startCommand(options);
  return formatCommandResult(await command.exited, command.output);
}

/**
 * Kills processes a Parlor process that died left behind, found by the tag in their environment (run directly):
 * SIGTERM first, so that a reaper among them takes along what shed the tag, then SIGKILL to what is left.
 */
export async function killTagged(tag: string): Promise<void> {
  for (const pid of liveProcesses(-1, tag)) signalProcess(pid, 'SIGTERM');
  for (let waited = 0; waited < KILL_GRACE_MS + REAPER_GRACE_MS && liveProcesses(-1, tag).length > 0; waited += POLL_MS) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  for (const pid of liveProcesses(-1, tag)) signalProcess(pid, 'SIGKILL');
}

/**
 * bubblewrap reports a command killed by signal N as status 128+N, the way a shell does. (A command that runs
 * `exit 143` itself reads the same; the shell convention is the better guess.)
 */
function signalFromStatus(code: number | undefined): NodeJS.Signals | undefined {
  if (code === undefined || code <= 128 || code > 128 + 64) return undefined;
  return (Object.entries(os.constants.signals).find(([, number]) => number === code - 128)?.[0] as NodeJS.Signals | undefined) ?? undefined;
}

/**
 * SIGTERM to the process group (and, for a command run directly, to every process carrying its tag: `setsid`
 * leaves the group but keeps the environment), then SIGKILL after a grace period to whatever is still alive.
 */
async function killTree(pgid: number, tag: string | undefined, reaped = false): Promise<void> {
  const signalAll = (signal: NodeJS.Signals) => {
    signalGroup(pgid, signal);
    for (const pid of tag ? liveProcesses(pgid, tag) : []) signalProcess(pid, signal);
  };
  signalAll('SIGTERM');
  // A reaper (the group's leader) kills what is left a second after SIGTERM and ends once nothing is: it gets the
  // time to, since killing it first would hand what it keeps to init.
  const grace = reaped ? KILL_GRACE_MS + REAPER_GRACE_MS : KILL_GRACE_MS;
  for (let waited = 0; waited < grace && anyAlive(pgid, tag); waited += POLL_MS) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  if (anyAlive(pgid, tag)) signalAll('SIGKILL');
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // The group is already gone.
  }
}

function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Gone already.
  }
}

function anyAlive(pgid: number, tag: string | undefined): boolean {
  if (!fs.existsSync('/proc/self/stat')) {
    // No /proc: the group answering a null signal is all there is to go by.
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
  return liveProcesses(pgid, tag).length > 0;
}

/**
 * Processes in the group `pgid`, or (with a tag) whose environment holds `PARLOR_SHELL_RUN=<tag>`, that are not
 * zombies. Linux only; an empty list elsewhere.
 */
function liveProcesses(pgid: number, tag: string | undefined): number[] {
  let pids: string[];
  try {
    pids = fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const needle = tag ? Buffer.from(`${RUN_TAG}=${tag}\0`) : undefined;
  const found: number[] = [];
  for (const pid of pids) {
    try {
      // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses, so read after the last `)`.
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z' || state === 'X') continue;
      if (Number(pgrp) === pgid || (needle && fs.readFileSync(`/proc/${pid}/environ`).includes(needle))) found.push(Number(pid));
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}
