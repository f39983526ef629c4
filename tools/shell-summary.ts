import { codeBlock, showVerbatim, verbatimBlock } from '#src/questions/visible.ts';

/**
 * The approval question's account of the call, whole: the command in a code block (fenced so nothing inside it can
 * change how it is shown, with invisible characters and long runs of spaces written out), then its folder, timeout
 * and variables, values in full. Nothing is cut: what is approved is what runs.
 */
export function summarizeShellCall(args: { command: string; cwd?: string; timeout_ms?: number; env?: Record<string, string> }): string {
  const lines = [verbatimBlock(args.command)];
  const details: string[] = [];
  if (args.cwd) details.push(`in ${showVerbatim(args.cwd, { singleLine: true })}`);
  if (args.timeout_ms !== undefined) details.push(`timeout ${formatSeconds(args.timeout_ms)}`);
  if (details.length) lines.push(`(${details.join(', ')})`);
  const env = Object.entries(args.env ?? {});
  if (env.length) {
    lines.push('with these variables:');
    lines.push(codeBlock(env.map(([name, value]) => `${name}=${showVerbatim(value, { singleLine: true })}`).join('\n')));
  }
  return lines.join('\n');
}

export function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${(ms / 1000).toFixed(1)}s`;
}
