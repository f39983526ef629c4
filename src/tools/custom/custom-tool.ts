// One custom tool folder as a Tool: a shell template whose placeholders stand for the arguments, or an executable
// that reads its arguments as JSON on stdin; either runs the way shell_exec's commands do.
import { quote } from 'shell-quote';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import type { CustomCommandResult, CustomToolCommands } from './commands.ts';
import type { ToolManifest } from './manifest.ts';

/** What the runner allows on top of the tool's own timeout, which fires first and reports what the tool printed. */
const RUNNER_GRACE_MS = 30_000;
const TEMPLATE_PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;
/** Arguments reach a template's command in the environment under this prefix. */
const ARGUMENT_VARIABLE = 'PARLOR_ARG_';
/** The arguments of one call, at most (a variable's value is capped at 128 KiB by the kernel). */
const MAX_ARGUMENTS_CHARS = 100_000;

/**
 * The template as the shell runs it: every `{{name}}` becomes `${PARLOR_ARG_name+"$PARLOR_ARG_name"}`, the argument
 * as one word (or no word when it was not given), whatever its characters. The values are never part of the script,
 * so nothing in them is read as shell code, wherever the placeholder stands (in `$(...)`, backticks, a here-document).
 */
export function templateScript(template: string): string {
  return template.replace(TEMPLATE_PLACEHOLDER, (_, name: string) => `\${${ARGUMENT_VARIABLE}${name}+"$${ARGUMENT_VARIABLE}${name}"}`);
}

/**
 * The command as it would read with the arguments written into it, quoted: what the deny list judges (`rm -rf
 * {{folder}}` with `/` is refused as `rm -rf /` would be). It is never run.
 */
export function commandAsWritten(template: string, args: Record<string, unknown>): string {
  return template.replace(TEMPLATE_PLACEHOLDER, (_, name: string) => {
    const value = Object.hasOwn(args, name) ? args[name] : undefined;
    if (value === undefined) return '';
    return quote([typeof value === 'string' ? value : JSON.stringify(value)]);
  });
}

/** Why the deny list refuses the call (arguments too long for a command are refused when it runs). */
function deniedCall(commands: CustomToolCommands, template: string, args: Record<string, unknown>): string | undefined {
  if ('error' in argumentVariables(args)) return undefined;
  return commands.deniedReason(commandAsWritten(template, args));
}

/** The variables that carry the arguments (non-strings as JSON); an error when they are too long for a command. */
export function argumentVariables(args: Record<string, unknown>): Record<string, string> | { error: string } {
  const vars: Record<string, string> = {};
  let chars = 0;
  for (const [name, value] of Object.entries(args)) {
    if (value === undefined || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) continue;
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    if (text.includes('\0')) return { error: `the argument ${name} holds a NUL character, which a command cannot take` };
    chars += text.length;
    vars[`${ARGUMENT_VARIABLE}${name}`] = text;
  }
  if (chars > MAX_ARGUMENTS_CHARS) {
    return { error: `the arguments are ${chars} characters, more than a command takes (${MAX_ARGUMENTS_CHARS}); a tool with "run" reads its arguments from stdin instead` };
  }
  return vars;
}

export function createCustomTool(manifest: ToolManifest, folder: string, commands: CustomToolCommands): Tool<Record<string, unknown>> {
  const timeoutMs = manifest.timeoutSeconds * 1000;
  const how = manifest.how;
  return {
    name: manifest.name,
    description: manifest.description,
    group: 'custom',
    tier: 'search',
    parameters: manifest.parameters,
    ...(manifest.contexts ? { contexts: manifest.contexts } : {}),
    timeoutMs: timeoutMs + RUNNER_GRACE_MS,
    available: ({ persona }) => commands.available(persona),
    approval: {
      // A command the deny list refuses is refused before anyone is asked, as shell_exec's are: judged as written
      // with its arguments, though they reach the shell as variables.
      ...('command' in how ? { refuse: (args: Record<string, unknown>) => deniedCall(commands, how.command, args) } : {}),
      byDefault: manifest.approve,
    },
    async run(args, ctx) {
      const missing = manifest.secrets.filter((name) => !Object.hasOwn(ctx.persona.secrets, name));
      if (missing.length) {
        return `error: ${manifest.name} needs the secret${missing.length > 1 ? 's' : ''} ${missing.join(', ')}, which persona ${ctx.persona.name}'s .env does not have; it did not run.`;
      }
      // By reference: the value is put in by the run path and never passes through anything the model sees.
      const env = Object.fromEntries(manifest.secrets.map((name) => [name, `$${name}`]));
      let argv: string[];
      let input: string | undefined;
      let values: Record<string, string> | undefined;
      if ('command' in how) {
        const denied = deniedCall(commands, how.command, args);
        if (denied) return `denied: ${denied}; ${manifest.name} did not run.`;
        const vars = argumentVariables(args);
        if ('error' in vars) return `error: ${vars.error}; ${manifest.name} did not run.`;
        values = vars as Record<string, string>;
        argv = ['/bin/sh', '-c', templateScript(how.command)];
      } else {
        argv = [how.run];
        input = JSON.stringify(args);
      }
      if (ctx.signal.aborted) return `cancelled: the turn was stopped before ${manifest.name} ran.`;
      ctx.log.debug({ tool: manifest.name, folder }, 'running custom tool');
      const result = await commands.run({ argv, env, ...(values ? { values } : {}), timeoutMs, input, folder, tool: manifest.name }, ctx);
      if ('error' in result) return `error: ${result.error}; ${manifest.name} did not run.`;
      return formatResult(manifest.name, result, ctx);
    },
  };
}

/**
 * A tool that exits 0 answers with its stdout. Otherwise the model reads how it ended, its stdout and its stderr,
 * since that is where a program says what went wrong.
 */
function formatResult(name: string, result: CustomCommandResult, ctx: ToolContext): string {
  const stdout = result.stdout.replace(/\n$/, '');
  const truncated = result.stdoutDropped > 0 ? [`[output truncated: ${result.stdoutDropped} more bytes]`] : [];
  if (result.status === '0') return [stdout || '(no output)', ...truncated].join('\n');
  const stderr = result.stderr.replace(/\n$/, '');
  let head: string;
  if (result.status === 'timeout') head = `timeout: ${name} did not finish in time and was stopped`;
  else if (result.status === 'cancelled') head = `cancelled: the turn was stopped while ${name} was running`;
  else head = `error: ${name} failed (exit=${result.status})`;
  if (result.status !== 'cancelled') ctx.log.info({ tool: name, status: result.status }, 'custom tool failed');
  return [head, ...(stdout ? [stdout] : []), ...truncated, ...(stderr ? ['[stderr]', stderr] : []), ...result.notes].join('\n');
}
