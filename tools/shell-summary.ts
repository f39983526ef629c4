import { codeBlock, showVerbatim, verbatimBlock } from '#src/questions/visible.ts';

/**
 * The approval question's account of the call, whole, and all of it in code blocks, so no Markdown in it changes how
 * it is shown: the command (fenced so nothing inside it can end the block, invisible characters and long runs of
 * spaces written out), then its folder and timeout, then its variables, values in full. Nothing is cut: what is
 * approved is what runs.
 */
export function summarizeShellCall(args: { command: string; cwd?: string; timeout_ms?: number; env?: Record<string, string> }): string {
  const lines = [verbatimBlock(args.command)];
  const details: string[] = [];
  if (args.cwd) details.push(`folder:  ${showVerbatim(args.cwd, { singleLine: true })}`);
  if (args.timeout_ms !== undefined) details.push(`timeout: ${formatSeconds(args.timeout_ms)}`);
  if (details.length) lines.push('with:', codeBlock(details.join('\n')));
  const env = Object.entries(args.env ?? {});
  if (env.length) {
    lines.push(details.length ? 'and these variables:' : 'with these variables:');
    lines.push(codeBlock(env.map(([name, value]) => `${showVerbatim(name, { singleLine: true })}=${showVerbatim(value, { singleLine: true })}`).join('\n')));
  }
  return lines.join('\n');
}

export function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${(ms / 1000).toFixed(1)}s`;
}
