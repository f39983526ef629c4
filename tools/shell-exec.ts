import fs from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import type { Persona } from '#src/config/persona.ts';
import type { Tool } from '#src/tools/types.ts';
import { deniedReason } from './shell-deny.ts';
import { formatSeconds, summarizeShellCall } from './shell-summary.ts';

export { deniedReason } from './shell-deny.ts';

interface Args {
  command: string;
  cwd?: string;
  timeout_ms?: number;
  env?: Record<string, string>;
}

const MAX_COMMAND_CHARS = 10_000;
const MAX_TIMEOUT_MS = 600_000;
const DEFAULT_TIMEOUT_MS = 60_000;
export const MAX_OUTPUT_BYTES = 16_384;
// Between SIGTERM and SIGKILL for the process group.
const KILL_GRACE_MS = 1_000;
// How long to keep reading after the shell exits, for background children that still hold the output pipe.
const DRAIN_AFTER_EXIT_MS = 1_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_REFERENCE = /^\$([A-Za-z_][A-Za-z0-9_]*)$/;
// Taken from Parlor's own environment; everything else (DATABASE_URL, API keys, bot tokens) stays out.
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM', 'USER', 'LOGNAME', 'SHELL', 'TMPDIR'];

/**
 * Runs a shell command in the persona's workspace, with a scrubbed environment, capped output and a timeout that
 * kills the whole process tree. Problems with the arguments come back as `error: ...` results; nothing runs then.
 */
export function createShellExecTool(): Tool<Args> {
  return {
    name: 'shell_exec',
    description:
      'Run a shell command with /bin/sh -c in your workspace folder (cwd is a folder relative to it) and get back "exit=<code>" and the combined stdout+stderr. ' +
      `Output past ${MAX_OUTPUT_BYTES / 1024} KB is cut off, so filter or redirect big output to a file. ` +
      `The command is killed with everything it started after timeout_ms (default ${DEFAULT_TIMEOUT_MS / 1000} s, at most ${MAX_TIMEOUT_MS / 1000} s); there is no stdin. ` +
      'The environment is minimal (PATH, HOME, locale). env adds variables; a value written as "$NAME" is replaced by your secret NAME, ' +
      'so pass secrets that way (e.g. env {"GH_TOKEN": "$GITHUB_TOKEN"}) and refer to them in the command as "$GH_TOKEN" rather than writing them out.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['command'],
      properties: {
        command: { type: 'string', minLength: 1, maxLength: MAX_COMMAND_CHARS },
        cwd: { type: 'string', minLength: 1, description: 'Folder to run in, relative to the workspace (default: the workspace).' },
        timeout_ms: { type: 'integer', minimum: 1, maximum: MAX_TIMEOUT_MS, description: `Default ${DEFAULT_TIMEOUT_MS}.` },
        env: {
          type: 'object',
          propertyNames: { pattern: ENV_NAME.source },
          additionalProperties: { type: 'string' },
          description: 'Extra environment variables; "$NAME" as a value passes your secret NAME.',
        },
      },
    },
    // The runner's outer limit; the tool's own timeout (at most MAX_TIMEOUT_MS) fires first and reports the output.
    timeoutMs: MAX_TIMEOUT_MS + 30_000,
    approval: {
      summary: summarizeShellCall,
      // "Always allow" covers the exact call: the command, and its folder and variables when it has them.
      scope: (args) => (args.cwd || args.env ? JSON.stringify({ command: args.command, cwd: args.cwd, env: args.env }) : args.command),
      refuse: (args) => deniedReason(args.command),
    },
    async run(args, ctx) {
      const denied = deniedReason(args.command);
      if (denied) return `denied: ${denied}; the command did not run.`;
      if (ctx.signal.aborted) return 'cancelled: the turn was stopped before the command ran.';

      const env = buildEnv(args.env ?? {}, ctx.persona);
      if ('error' in env) return `error: ${env.error}; the command did not run.`;
      let cwd: string;
      try {
        cwd = await resolveCwd(ctx.persona, args.cwd);
      } catch (err) {
        return `error: ${(err as Error).message}; the command did not run.`;
      }
      const timeoutMs = Math.min(Math.max(args.timeout_ms ?? DEFAULT_TIMEOUT_MS, 1), MAX_TIMEOUT_MS);
      ctx.log.debug({ tool: 'shell_exec', cwd, timeoutMs }, 'running shell command');
      return execute(args.command, { cwd, env: env.vars, timeoutMs, signal: ctx.signal });
    },
  };
}

async function execute(command: string, options: { cwd: string; env: Record<string, string>; timeoutMs: number; signal: AbortSignal }): Promise<string> {
  const subprocess = execa('/bin/sh', ['-c', command], {
    cwd: options.cwd,
    env: options.env,
    extendEnv: false,
    // Its own process group, so the whole tree can be killed with one signal to -pid.
    detached: true,
    stdin: 'ignore',
    all: true,
    // Read by us as a stream and counted, so a command printing gigabytes costs no memory.
    buffer: false,
    reject: false,
  });

  let stopped: 'timeout' | 'cancelled' | undefined;
  let groupKilled: Promise<void> | undefined;
  const stop = (why: 'timeout' | 'cancelled') => {
    if (stopped || subprocess.pid === undefined) return;
    stopped = why;
    const pid = subprocess.pid;
    killGroup(pid, 'SIGTERM');
    // Unconditionally: children that ignore SIGTERM outlive the shell.
    groupKilled = new Promise((resolve) => setTimeout(() => resolve(killGroup(pid, 'SIGKILL')), KILL_GRACE_MS));
  };
  const timer = setTimeout(() => stop('timeout'), options.timeoutMs);
  const onAbort = () => stop('cancelled');
  options.signal.addEventListener('abort', onAbort, { once: true });
  // Stopped while the arguments were being checked.
  if (options.signal.aborted) stop('cancelled');

  // A background child (`server &`) may keep the output pipe open after the shell is gone: stop reading then.
  let abandonedOutput = false;
  let drainTimer: NodeJS.Timeout | undefined;
  subprocess.once('exit', () => {
    drainTimer = setTimeout(() => {
      abandonedOutput = true;
      subprocess.all?.destroy();
      subprocess.stdout?.destroy();
      subprocess.stderr?.destroy();
    }, stopped ? KILL_GRACE_MS + DRAIN_AFTER_EXIT_MS : DRAIN_AFTER_EXIT_MS);
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
  // Report only once nothing of the tree can still be running.
  await groupKilled;

  if (result.exitCode === undefined && result.signal === undefined && !stopped) {
    return `error: the command could not be started: ${result.shortMessage}`;
  }

  let status: string;
  const notes: string[] = [];
  if (stopped === 'timeout') {
    status = 'timeout';
    notes.push(`[killed after ${formatSeconds(options.timeoutMs)}: timed out]`);
  } else if (stopped === 'cancelled') {
    status = 'cancelled';
    notes.push('[killed: the turn was stopped]');
  } else if (result.signal) {
    status = `signal ${result.signal}`;
    notes.push(`[killed by signal ${result.signal}]`);
  } else {
    status = String(result.exitCode);
  }
  if (dropped > 0) notes.unshift(`[output truncated: ${dropped} more bytes]`);
  if (abandonedOutput) notes.push('[stopped reading: a background process still held the output]');

  const output = Buffer.concat(chunks).toString('utf8').replace(/\n$/, '');
  return [`exit=${status}`, output || '(no output)', ...notes].join('\n');
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}

/** Variables that make an innocent command run other code (preloaded libraries, shell start-up files). */
const UNSAFE_ENV = /^(LD_.*|DYLD_.*|BASH_ENV|ENV|IFS|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|PS4)$/;

function buildEnv(extra: Record<string, string>, persona: Persona): { vars: Record<string, string> } | { error: string } {
  const vars: Record<string, string> = {};
  for (const name of PASSED_THROUGH) {
    const value = process.env[name];
    if (value !== undefined) vars[name] = value;
  }
  for (const [name, value] of Object.entries(extra)) {
    if (!ENV_NAME.test(name)) return { error: `"${name}" is not a valid environment variable name` };
    if (UNSAFE_ENV.test(name)) return { error: `"${name}" changes how programs load or how the shell starts, so it cannot be set` };
    const reference = SECRET_REFERENCE.exec(value);
    if (!reference) {
      vars[name] = value;
      continue;
    }
    const secretName = reference[1]!;
    if (!Object.hasOwn(persona.secrets, secretName)) {
      const known = Object.keys(persona.secrets);
      return {
        error: `env ${name}: "${value}" names no secret of yours (${known.length ? `your secrets: ${known.join(', ')}` : 'you have no secrets'})`,
      };
    }
    vars[name] = persona.secrets[secretName]!;
  }
  return { vars };
}

/** The real path of the folder to run in: the workspace (created when missing) or a folder inside it. */
async function resolveCwd(persona: Persona, given: string | undefined): Promise<string> {
  await fs.mkdir(persona.workspace, { recursive: true });
  const root = await fs.realpath(persona.workspace);
  if (given === undefined) return root;
  const candidate = path.resolve(root, given);
  if (!isInside(root, candidate)) throw new Error(`cwd "${given}" is outside the workspace`);
  let real: string;
  try {
    real = await fs.realpath(candidate);
  } catch {
    throw new Error(`cwd "${given}" does not exist in the workspace`);
  }
  if (!isInside(root, real)) throw new Error(`cwd "${given}" leads outside the workspace`);
  if (!(await fs.stat(real)).isDirectory()) throw new Error(`cwd "${given}" is not a folder`);
  return real;
}

function isInside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}
