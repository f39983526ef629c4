// One custom tool folder as a Tool: a shell template with its placeholders shell-escaped, or an executable that
// reads its arguments as JSON on stdin; either runs the way shell_exec's commands do.
import { quote } from 'shell-quote';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import type { CustomCommandResult, CustomToolCommands } from './commands.ts';
import type { ToolManifest } from './manifest.ts';

/** What the runner allows on top of the tool's own timeout, which fires first and reports what the tool printed. */
const RUNNER_GRACE_MS = 30_000;
const TEMPLATE_PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The template with every `{{name}}` replaced by the argument, escaped for `sh` (non-strings as JSON). */
export function expandCommand(template: string, args: Record<string, unknown>): string {
  return template.replace(TEMPLATE_PLACEHOLDER, (_, name: string) => {
    const value = args[name];
    if (value === undefined) return "''";
    return quote([typeof value === 'string' ? value : JSON.stringify(value)]);
  });
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
      // The exact command is refused before anyone is asked, as shell_exec's are.
      ...('command' in how ? { refuse: (args: Record<string, unknown>) => commands.deniedReason(expandCommand(how.command, args)) } : {}),
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
      if ('command' in how) {
        const script = expandCommand(how.command, args);
        const denied = commands.deniedReason(script);
        if (denied) return `denied: ${denied}; ${manifest.name} did not run.`;
        argv = ['/bin/sh', '-c', script];
      } else {
        argv = [how.run];
        input = JSON.stringify(args);
      }
      if (ctx.signal.aborted) return `cancelled: the turn was stopped before ${manifest.name} ran.`;
      ctx.log.debug({ tool: manifest.name, folder }, 'running custom tool');
      const result = await commands.run({ argv, env, timeoutMs, input, folder, tool: manifest.name }, ctx);
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
