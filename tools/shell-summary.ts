/**
 * The approval question's account of the call: the whole command in a code block (fenced so nothing inside it can
 * change how it is shown), then its folder, timeout and variables.
 */
export function summarizeShellCall(args: { command: string; cwd?: string; timeout_ms?: number; env?: Record<string, string> }): string {
  const command = args.command.length > 3000 ? `${args.command.slice(0, 3000)}\n… (${args.command.length} characters in all)` : args.command;
  const longestRun = Math.max(2, ...(command.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longestRun + 1);
  const details: string[] = [];
  if (args.cwd) details.push(`in ${args.cwd}`);
  if (args.timeout_ms !== undefined) details.push(`timeout ${formatSeconds(args.timeout_ms)}`);
  const env = Object.entries(args.env ?? {}).map(([name, value]) => `${name}=${value.length > 40 ? `${value.slice(0, 40)}…` : value}`);
  if (env.length) details.push(`env ${env.join(' ')}`);
  return `${fence}\n${command}\n${fence}${details.length ? `\n(${details.join(', ')})` : ''}`;
}

export function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${(ms / 1000).toFixed(1)}s`;
}
