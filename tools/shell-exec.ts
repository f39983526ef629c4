import type { Persona } from '#src/config/persona.ts';
import type { CustomToolCommands } from '#src/tools/custom/commands.ts';
import { sandboxedCommand, shellAccess, shellMode, shellSandboxStatus, type SandboxStatus, type ShellAccess } from '#src/tools/sandbox.ts';
import { lockHiddenFiles, shareWorkspace } from '#src/tools/shell-user-files.ts';
import type { ShellUser } from '#src/tools/shell-user.ts';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import { resolveWorkspaceFolder } from '#src/tools/workspace.ts';
import { deniedReason } from './shell-deny.ts';
import { formatDuration, type ProcessRegistry } from '#src/tools/processes.ts';
import { formatCommandResult, MAX_OUTPUT_BYTES, startCommand, type RunOptions, type StartedCommand } from './shell-process.ts';
import { summarizeShellCall } from './shell-summary.ts';

export { deniedReason } from './shell-deny.ts';
export { MAX_OUTPUT_BYTES } from './shell-process.ts';

interface Args {
  command: string;
  cwd?: string;
  timeout_ms?: number;
  env?: Record<string, string>;
  yield_ms?: number;
  background?: boolean;
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
  /** Where a command still running after its yield goes on (absent: every command runs to its end or timeout). */
  processes?: ProcessRegistry;
}

const MAX_COMMAND_CHARS = 10_000;
const MAX_TIMEOUT_MS = 600_000;
const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_YIELD_MS = 10_000;
/** A command in the background runs this long unless timeout_ms says otherwise, and at most MAX_BACKGROUND_MS. */
const DEFAULT_BACKGROUND_MS = 30 * 60_000;
const MAX_BACKGROUND_MS = 2 * 3600_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_REFERENCE = /^\$([A-Za-z_][A-Za-z0-9_]*)$/;
// Taken from Parlor's own environment; everything else (DATABASE_URL, API keys, bot tokens) stays out.
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM', 'USER', 'LOGNAME', 'SHELL', 'TMPDIR'];

const SHARED_DESCRIPTION =
  'The environment is minimal (PATH, HOME, locale). env adds variables; a value written as "$NAME" is replaced by your secret NAME, ' +
  'so pass secrets that way (e.g. env {"GH_TOKEN": "$GITHUB_TOKEN"}) and refer to them in the command as "$GH_TOKEN" rather than writing them out.';

/**
 * Runs a shell command in the persona's workspace, in the sandbox (see src/tools/sandbox.ts), with a scrubbed
 * environment, capped output and a timeout; whatever the command started is gone when the result comes back.
 * Without bubblewrap, a Parlor running as root runs it as an unprivileged user of its own (see
 * src/tools/shell-user.ts). Without either it runs directly only for a persona that opted in with
 * `"shell": "unsandboxed"`, and is not offered to the others. Problems with the arguments come back as `error: ...` results; nothing runs then.
 */
export function createShellExecTool(options: ShellExecOptions = {}): Tool<Args> {
  const commands = createWorkspaceCommands(options.sandbox);
  return {
    name: 'shell_exec',
    description: options.processes
      ? 'Run a shell command with /bin/sh -c in your workspace folder (cwd is a folder relative to it) and get back "exit=<code>" and the combined stdout+stderr. ' +
        'Only the workspace is yours to write (in the bubblewrap sandbox /tmp is private to the command too). ' +
        `Output past ${MAX_OUTPUT_BYTES / 1024} KB is cut off, so filter or redirect big output to a file. ` +
        `A command still running after yield_ms (default ${DEFAULT_YIELD_MS / 1000} s) goes on in the background: you get a bg_… handle and its output so far, ` +
        'the process tool reads, writes and stops it, and a message comes to this conversation when it exits (so "tell me when the build is done" needs no polling). ' +
        'background=true sends it there at once and keeps its stdin open for process write. ' +
        `timeout_ms kills it with everything it started (default ${DEFAULT_TIMEOUT_MS / 1000} s in the foreground, ${DEFAULT_BACKGROUND_MS / 60_000} min in the background, at most ${MAX_BACKGROUND_MS / 3600_000} h). ` +
        SHARED_DESCRIPTION
      : 'Run a shell command with /bin/sh -c in your workspace folder (cwd is a folder relative to it) and get back "exit=<code>" and the combined stdout+stderr. ' +
        'Only the workspace is yours to write (in the bubblewrap sandbox /tmp is private to the command too). ' +
        `Output past ${MAX_OUTPUT_BYTES / 1024} KB is cut off, so filter or redirect big output to a file. ` +
        `The command is killed with everything it started after timeout_ms (default ${DEFAULT_TIMEOUT_MS / 1000} s, at most ${MAX_TIMEOUT_MS / 1000} s), ` +
        'and background processes it leaves end with it; there is no stdin. ' +
        SHARED_DESCRIPTION,
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['command'],
      properties: {
        command: { type: 'string', minLength: 1, maxLength: MAX_COMMAND_CHARS },
        cwd: { type: 'string', minLength: 1, description: 'Folder to run in, relative to the workspace (default: the workspace).' },
        timeout_ms: { type: 'integer', minimum: 1, maximum: options.processes ? MAX_BACKGROUND_MS : MAX_TIMEOUT_MS, description: `Default ${DEFAULT_TIMEOUT_MS}.` },
        ...(options.processes
          ? {
              yield_ms: { type: 'integer', minimum: 1_000, maximum: MAX_TIMEOUT_MS, description: `Wait this long before going on in the background (default ${DEFAULT_YIELD_MS}).` },
              background: { type: 'boolean', description: 'Go on in the background at once, with stdin open for process write.' },
            }
          : {}),
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
    available: ({ persona }) => commands.mode(persona) !== 'off',
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
      // Background commands are for conversations that a wake can reach: not for a task, whose turn ends with its result.
      const processes = ctx.kind === 'task' ? undefined : options.processes;
      const background = processes !== undefined && args.background === true;
      const foregroundMs = Math.min(args.timeout_ms ?? DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS);
      const backgroundMs = Math.min(args.timeout_ms ?? DEFAULT_BACKGROUND_MS, MAX_BACKGROUND_MS);
      const command = await commands.start(
        { argv: ['/bin/sh', '-c', args.command], cwd: args.cwd, env: args.env, timeoutMs: background ? backgroundMs : foregroundMs, keepInput: background, tool: 'shell_exec' },
        ctx,
      );
      if ('error' in command) return `error: ${command.error}; the command did not run.`;
      if (!processes) return formatCommandResult(await command.exited, command.output);
      return runOrYield(command, processes, ctx, { command: args.command, background, yieldMs: args.yield_ms ?? DEFAULT_YIELD_MS, backgroundMs });
    },
  };
}

/** A command to run in the persona's workspace the way shell_exec runs its own. */
export interface WorkspaceCommand {
  /** The program and its arguments (`/bin/sh -c <command>` for shell_exec). */
  argv: string[];
  /** The folder to start in, relative to the workspace (default: the workspace). */
  cwd?: string;
  /** Variables on top of the minimal environment; a value written "$NAME" is the persona's secret NAME. */
  env?: Record<string, string>;
  /** Variables taken as they are, after `env` (a custom tool's arguments). */
  values?: Record<string, string>;
  timeoutMs: number;
  /** Keep stdin open for `write` (a background command, a custom tool's JSON input); else it is at its end at once. */
  keepInput?: boolean;
  /** Keep stderr apart from the output (a custom tool's result is its stdout). */
  separateStderr?: boolean;
  /** Folders besides the system's the command may read but not write (a custom tool's own folder). */
  readOnly?: readonly string[];
  /** For logs. */
  tool: string;
}

/** Runs commands for shell_exec and custom tools: one policy, one environment, one way of starting them. */
export interface WorkspaceCommands {
  /** How the persona's commands run: in the sandbox, as a user of their own, directly, or not at all. */
  mode(persona: Persona): ShellAccess['mode'];
  /** Starts the command; or why it cannot start (the caller adds "the command did not run"). */
  start(command: WorkspaceCommand, ctx: ToolContext): Promise<StartedCommand | { error: string }>;
}

/**
 * The run path shell_exec and custom tools share: the persona's workspace as cwd, the sandbox (or a user of their
 * own, or, by the owner's choice, nothing), the scrubbed environment, the timeout. `policy` is the persona as the
 * shell policy reads it (custom tools are not off because the persona denies shell_exec).
 */
export function createWorkspaceCommands(
  sandbox: ShellExecOptions['sandbox'] = {},
  policy: (persona: Persona) => Persona = (persona) => persona,
): WorkspaceCommands {
  const status = sandbox.status ?? shellSandboxStatus;
  const hide = sandbox.hide ?? [];
  const warned = new Set<string>();
  return {
    mode: (persona) => shellMode(policy(persona), status()),
    async start(command, ctx) {
      const current = status();
      const access = shellAccess(policy(ctx.persona), current);
      if (access.mode === 'off') return { error: access.warning ?? `${command.tool} is off for this persona` };
      if (access.warning && !warned.has(ctx.persona.name)) {
        warned.add(ctx.persona.name);
        ctx.log.warn({ tool: command.tool, persona: ctx.persona.name }, access.warning);
      }

      let workspace: string;
      let cwd: string;
      try {
        workspace = await resolveWorkspaceFolder(ctx.persona);
        cwd = await resolveWorkspaceFolder(ctx.persona, command.cwd);
      } catch (err) {
        return { error: `cwd ${(err as Error).message}` };
      }
      const user = access.mode === 'separate-uid' ? current.separateUser : undefined;
      // Inside the sandbox the workspace is home and /tmp is the sandbox's own; the shell user has no home but that.
      const base: Record<string, string> =
        access.mode === 'sandboxed' ? { HOME: workspace, TMPDIR: '/tmp' } : user ? { HOME: workspace, TMPDIR: '/tmp', USER: user.name, LOGNAME: user.name } : {};
      const env = buildEnv(command.env ?? {}, ctx.persona, base);
      if ('error' in env) return env;
      const common = {
        timeoutMs: command.timeoutMs,
        signal: ctx.signal,
        keepInput: command.keepInput,
        separateStderr: command.separateStderr,
        env: { ...env.vars, ...command.values },
      };
      const [file, ...args] = command.argv as [string, ...string[]];
      ctx.log.debug({ tool: command.tool, cwd, mode: access.mode, keepInput: command.keepInput }, 'running shell command');
      let run: RunOptions;
      if (access.mode === 'unsandboxed') run = { file, args, sandboxed: false, cwd, ...common };
      else if (user) {
        const refused = await prepareForUser(user, workspace, hide, ctx.log);
        if (refused) return { error: refused };
        run = { file, args, sandboxed: false, user, cwd, ...common };
      } else {
        const sandboxed = () => sandboxedCommand(command.argv, { workspace, cwd, hide, readOnly: command.readOnly ?? [] });
        const first = sandboxed();
        if (!first) return { error: 'the sandbox is not available' };
        run = { ...first, sandboxed: true, again: sandboxed, cwd: workspace, ...common };
      }
      return startCommand(run);
    },
  };
}

/**
 * Custom tools' commands (src/tools/custom) run as shell_exec's do. The persona's `deny` of shell_exec keeps the
 * model's own commands out, not the tools its owner wrote, so it does not turn these off.
 */
export function createCustomToolCommands(sandbox: ShellExecOptions['sandbox'] = {}): CustomToolCommands {
  const commands = createWorkspaceCommands(sandbox, (persona) => ({
    ...persona,
    tools: { ...persona.tools, deny: persona.tools.deny.filter((name) => name !== 'shell_exec') },
  }));
  return {
    available: (persona) => commands.mode(persona) !== 'off',
    deniedReason,
    async run(request, ctx) {
      const started = await commands.start(
        {
          argv: request.argv,
          env: request.env,
          ...(request.values ? { values: request.values } : {}),
          timeoutMs: request.timeoutMs,
          keepInput: request.input !== undefined,
          separateStderr: true,
          readOnly: [request.folder],
          tool: request.tool,
        },
        ctx,
      );
      if ('error' in started) return started;
      if (request.input !== undefined) started.write(request.input, true);
      const exit = await started.exited;
      if (exit.startError !== undefined) return { error: `the command could not be started: ${exit.startError}` };
      const stdout = started.output.headText();
      return { status: exit.status, stdout: stdout.text, stdoutDropped: stdout.dropped, stderr: started.errors?.headText().text ?? '', notes: exit.notes };
    },
  };
}

/**
 * The command's result when it ends within its yield; else it goes on in the background and the result is its
 * handle and output so far. A persona at its limit of background commands waits for the end in the foreground.
 */
async function runOrYield(
  command: StartedCommand,
  processes: ProcessRegistry,
  ctx: ToolContext,
  how: { command: string; background: boolean; yieldMs: number; backgroundMs: number },
): Promise<string> {
  if (!how.background) {
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      command.exited.then(() => true),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), how.yieldMs))),
    ]);
    clearTimeout(timer);
    if (ended || !command.running || ctx.signal.aborted) return formatCommandResult(await command.exited, command.output);
  }
  const owner = { persona: ctx.persona.name, conversationId: ctx.conversationId, turnId: ctx.turnId, origin: ctx.origin };
  const adopted = await processes.adopt(command, { ...owner, command: how.command, max: ctx.persona.tools.processes.max });
  if ('refused' in adopted) {
    if (how.background) {
      command.stop('killed');
      await command.exited;
      return `error: the command cannot go to the background: ${adopted.refused}; it was stopped.`;
    }
    const result = formatCommandResult(await command.exited, command.output);
    return `${result}\n[it could not go on in the background: ${adopted.refused}]`;
  }
  command.detach(how.backgroundMs);
  const output = command.output.read(0, MAX_OUTPUT_BYTES);
  return [
    `running in the background as ${adopted.id} (after ${formatDuration(Date.now() - command.startedAt)}; stopped after ${formatDuration(how.backgroundMs)} at most)`,
    output.text.replace(/\n$/, '') || '(no output yet)',
    `[${command.output.total} bytes so far: process read ${adopted.id} since=${output.next} for more; you will get a message here when it exits]`,
  ].join('\n');
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
