import type { Persona } from '#src/config/persona.ts';
import { sandboxedCommand, shellAccess, shellSandboxStatus, type SandboxStatus } from '#src/tools/sandbox.ts';
import { lockHiddenFiles, shareWorkspace } from '#src/tools/shell-user-files.ts';
import type { ShellUser } from '#src/tools/shell-user.ts';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import { resolveWorkspaceFolder } from '#src/tools/workspace.ts';
import { deniedReason } from './shell-deny.ts';
import { MAX_OUTPUT_BYTES, runCommand } from './shell-process.ts';
import { summarizeShellCall } from './shell-summary.ts';

export { deniedReason } from './shell-deny.ts';
export { MAX_OUTPUT_BYTES } from './shell-process.ts';

interface Args {
  command: string;
  cwd?: string;
  timeout_ms?: number;
  env?: Record<string, string>;
}

export interface ShellExecOptions {
  sandbox?: {
    /**
     * Paths no command may see even when they sit under a folder the sandbox shows (a checkout in /opt): Parlor's
     * home, the personas folder, the `.env` in Parlor's working directory. Run as a user of their own instead,
     * commands are kept from the `.env` files and the other files directly in these folders by their modes.
     */
    hide?: readonly string[];
    /**
     * Whether the sandbox works here, or else which user commands run as; a trial run of bubblewrap (and a look
     * for that user), once per process, by default.
     */
    status?: () => SandboxStatus;
  };
}

const MAX_COMMAND_CHARS = 10_000;
const MAX_TIMEOUT_MS = 600_000;
const DEFAULT_TIMEOUT_MS = 60_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_REFERENCE = /^\$([A-Za-z_][A-Za-z0-9_]*)$/;
// Taken from Parlor's own environment; everything else (DATABASE_URL, API keys, bot tokens) stays out.
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM', 'USER', 'LOGNAME', 'SHELL', 'TMPDIR'];

/**
 * Runs a shell command in the persona's workspace, in the sandbox (see src/tools/sandbox.ts), with a scrubbed
 * environment, capped output and a timeout; whatever the command started is gone when the result comes back.
 * Without bubblewrap, a Parlor running as root runs it as an unprivileged user of its own (see
 * src/tools/shell-user.ts). Without either it runs directly only for a persona that opted in with
 * `"shell": "unsandboxed"`, and is not offered to the others. Problems with the arguments come back as `error: ...` results; nothing runs then.
 */
export function createShellExecTool(options: ShellExecOptions = {}): Tool<Args> {
  const status = options.sandbox?.status ?? shellSandboxStatus;
  const hide = options.sandbox?.hide ?? [];
  const warned = new Set<string>();
  return {
    name: 'shell_exec',
    description:
      'Run a shell command with /bin/sh -c in your workspace folder (cwd is a folder relative to it) and get back "exit=<code>" and the combined stdout+stderr. ' +
      'Only the workspace is yours to write (in the bubblewrap sandbox /tmp is private to the command too). ' +
      `Output past ${MAX_OUTPUT_BYTES / 1024} KB is cut off, so filter or redirect big output to a file. ` +
      `The command is killed with everything it started after timeout_ms (default ${DEFAULT_TIMEOUT_MS / 1000} s, at most ${MAX_TIMEOUT_MS / 1000} s), ` +
      'and background processes it leaves end with it; there is no stdin. ' +
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
    available: ({ persona }) => shellAccess(persona, status()).mode !== 'off',
    approval: {
      summary: summarizeShellCall,
      // "Always allow" covers the exact call: the command, and its folder and variables when it has them.
      scope: (args) => (args.cwd || args.env ? JSON.stringify({ command: args.command, cwd: args.cwd, env: args.env }) : args.command),
      refuse: (args) => deniedReason(args.command),
      // A command acts on the machine: it asks first unless the persona's tools.jsonc lists shell_exec under "allow".
      byDefault: true,
    },
    async run(args, ctx) {
      const denied = deniedReason(args.command);
      if (denied) return `denied: ${denied}; the command did not run.`;
      if (ctx.signal.aborted) return 'cancelled: the turn was stopped before the command ran.';
      const current = status();
      const access = shellAccess(ctx.persona, current);
      if (access.mode === 'off') return `error: ${access.warning ?? 'shell_exec is off for this persona'}; the command did not run.`;
      if (access.warning && !warned.has(ctx.persona.name)) {
        warned.add(ctx.persona.name);
        ctx.log.warn({ tool: 'shell_exec', persona: ctx.persona.name }, access.warning);
      }

      let workspace: string;
      let cwd: string;
      try {
        workspace = await resolveWorkspaceFolder(ctx.persona);
        cwd = await resolveWorkspaceFolder(ctx.persona, args.cwd);
      } catch (err) {
        return `error: cwd ${(err as Error).message}; the command did not run.`;
      }
      const user = access.mode === 'separate-uid' ? current.separateUser : undefined;
      // Inside the sandbox the workspace is home and /tmp is the sandbox's own; the shell user has no home but that.
      const base: Record<string, string> =
        access.mode === 'sandboxed' ? { HOME: workspace, TMPDIR: '/tmp' } : user ? { HOME: workspace, TMPDIR: '/tmp', USER: user.name, LOGNAME: user.name } : {};
      const env = buildEnv(args.env ?? {}, ctx.persona, base);
      if ('error' in env) return `error: ${env.error}; the command did not run.`;
      const timeoutMs = Math.min(Math.max(args.timeout_ms ?? DEFAULT_TIMEOUT_MS, 1), MAX_TIMEOUT_MS);
      const argv = ['/bin/sh', '-c', args.command];
      const common = { timeoutMs, signal: ctx.signal };
      ctx.log.debug({ tool: 'shell_exec', cwd, timeoutMs, mode: access.mode }, 'running shell command');
      if (access.mode === 'unsandboxed') return runCommand({ file: argv[0]!, args: argv.slice(1), sandboxed: false, cwd, env: env.vars, ...common });
      if (user) {
        const refused = await prepareForUser(user, workspace, hide, ctx.log);
        if (refused) return `error: ${refused}; the command did not run.`;
        return runCommand({ file: argv[0]!, args: argv.slice(1), sandboxed: false, user, cwd, env: env.vars, ...common });
      }

      const sandboxed = sandboxedCommand(argv, { workspace, cwd, hide });
      if (!sandboxed) return 'error: the sandbox is not available; the command did not run.';
      return runCommand({ ...sandboxed, sandboxed: true, cwd: workspace, env: env.vars, ...common });
    },
  };
}

/**
 * Before each command run as the shell user: Parlor's secret files closed to it (checked every time, since a `.env`
 * may be written afresh at any moment), and the workspace opened to it. What stops the command, or undefined.
 */
async function prepareForUser(user: ShellUser, workspace: string, hide: readonly string[], log: ToolContext['log']): Promise<string | undefined> {
  const locked = await lockHiddenFiles(hide, user);
  if (locked.tightened.length) {
    log.warn({ tool: 'shell_exec', files: locked.tightened }, `made ${locked.tightened.join(', ')} unreadable to other users, so that commands run as ${user.name} cannot read them`);
  }
  if (locked.open.length) return `the ${user.name} user could read Parlor's secrets: ${locked.open.join('; ')}`;
  try {
    const changed = await shareWorkspace(workspace, user);
    if (changed) log.info({ tool: 'shell_exec', workspace, entries: changed }, `gave ${workspace} to the ${user.name} group, so that commands can write in it`);
  } catch (err) {
    return `the workspace could not be given to the ${user.name} user (${(err as Error).message})`;
  }
  return undefined;
}

/** Variables that make an innocent command run other code (preloaded libraries, shell start-up files). */
const UNSAFE_ENV = /^(LD_.*|DYLD_.*|BASH_ENV|ENV|IFS|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|PS4)$/;

function buildEnv(extra: Record<string, string>, persona: Persona, base: Record<string, string>): { vars: Record<string, string> } | { error: string } {
  const vars: Record<string, string> = {};
  for (const name of PASSED_THROUGH) {
    const value = base[name] ?? process.env[name];
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
