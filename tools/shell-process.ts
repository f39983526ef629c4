import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { execa } from 'execa';
import { formatSeconds } from './shell-summary.ts';

export const MAX_OUTPUT_BYTES = 16_384;
// Between SIGTERM and SIGKILL.
const KILL_GRACE_MS = 1_000;
const POLL_MS = 50;
// How long to keep reading after the command is over, for a process that escaped and still holds the output pipe.
const DRAIN_AFTER_EXIT_MS = 1_000;
// Set in the environment of a command run outside bubblewrap so that what it leaves behind can be found (see killTree).
const RUN_TAG = 'PARLOR_SHELL_RUN';

export interface RunOptions {
  /** The program to start: bubblewrap with its arguments, or /bin/sh directly. */
  file: string;
  args: string[];
  /** True when `file` is bubblewrap: the command is pid 2 of its own PID namespace. */
  sandboxed: boolean;
  /**
   * The user to run as instead of Parlor's own (Parlor being root). The command enters `cwd` first, as root, so it
   * starts there even when the folders above it are closed to that user.
   */
  user?: { uid: number; gid: number };
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * Runs a command and reports `exit=<status>` and its output (capped), once nothing it started can still be running.
 * In the sandbox the command's PID namespace ends with it, taking `sleep 1000 &` and `setsid ...` along; run
 * directly (as Parlor's user or a user of its own), its process group and every process carrying its tag are
 * killed when it ends or times out.
 */
export async function runCommand(options: RunOptions): Promise<string> {
  const tag = randomBytes(12).toString('hex');
  const subprocess = execa(options.file, options.args, {
    cwd: options.cwd,
    env: options.sandboxed ? options.env : { ...options.env, [RUN_TAG]: tag },
    extendEnv: false,
    // Node drops the supplementary groups (root's) before switching.
    ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    // Its own process group, so the whole tree can be signalled at once through -pid.
    detached: true,
    stdin: 'ignore',
    all: true,
    // Read by us as a stream and counted, so a command printing gigabytes costs no memory.
    buffer: false,
    reject: false,
  });

  let stopped: 'timeout' | 'cancelled' | undefined;
  let cleanedUp: Promise<void> | undefined;
  const cleanUp = () => {
    if (cleanedUp || subprocess.pid === undefined) return;
    cleanedUp = killTree(subprocess.pid, options.sandboxed ? undefined : tag);
  };
  let exited = false;
  const stop = (why: 'timeout' | 'cancelled') => {
    if (stopped || exited) return;
    stopped = why;
    cleanUp();
  };
  const timer = setTimeout(() => stop('timeout'), options.timeoutMs);
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

  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = 0;
  try {
    for await (const chunk of subprocess.all ?? []) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
      const room = MAX_OUTPUT_BYTES - kept;
      if (room > 0) {
        const part = bytes.length > room ? bytes.subarray(0, room) : bytes;
        chunks.push(part);
        kept += part.length;
      }
      dropped += Math.max(0, bytes.length - Math.max(room, 0));
    }
  } catch {
    // Destroyed above, or the pipe broke: what was read so far is the output.
  }
  const result = await subprocess;
  clearTimeout(timer);
  clearTimeout(drainTimer);
  options.signal.removeEventListener('abort', onAbort);
  await cleanedUp;

  if (result.exitCode === undefined && result.signal === undefined && !stopped) {
    return `error: the command could not be started: ${result.shortMessage}`;
  }

  const signal = result.signal ?? (options.sandboxed ? signalFromStatus(result.exitCode) : undefined);
  let status: string;
  const notes: string[] = [];
  if (stopped === 'timeout') {
    status = 'timeout';
    notes.push(`[killed after ${formatSeconds(options.timeoutMs)}: timed out]`);
  } else if (stopped === 'cancelled') {
    status = 'cancelled';
    notes.push('[killed: the turn was stopped]');
  } else if (signal) {
    status = `signal ${signal}`;
    notes.push(`[killed by signal ${signal}]`);
  } else {
    status = String(result.exitCode);
  }
  if (dropped > 0) notes.unshift(`[output truncated: ${dropped} more bytes]`);
  if (abandonedOutput) notes.push('[stopped reading: a background process still held the output]');

  const output = Buffer.concat(chunks).toString('utf8').replace(/\n$/, '');
  return [`exit=${status}`, output || '(no output)', ...notes].join('\n');
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
async function killTree(pgid: number, tag: string | undefined): Promise<void> {
  const signalAll = (signal: NodeJS.Signals) => {
    signalGroup(pgid, signal);
    for (const pid of tag ? liveProcesses(pgid, tag) : []) signalProcess(pid, signal);
  };
  signalAll('SIGTERM');
  for (let waited = 0; waited < KILL_GRACE_MS && anyAlive(pgid, tag); waited += POLL_MS) {
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
