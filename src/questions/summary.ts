import { codeBlock, showVerbatim } from './visible.ts';

/**
 * A tool call's arguments for a person deciding on it, whole and with nothing hidden: the JSON of the arguments
 * (which escapes control characters) with invisible characters and long runs of spaces written out.
 */
export function describeCallWhole(args: unknown): string {
  if (args === undefined || args === null || (typeof args === 'object' && Object.keys(args).length === 0)) return '(no arguments)';
  return codeBlock(showVerbatim(JSON.stringify(args, null, 2)));
}

/** A readable account of a tool call's arguments for a person deciding on it: one line per argument, bounded. */
export function summarizeArgs(args: unknown, options: { maxChars?: number; maxValueChars?: number } = {}): string {
  const maxChars = options.maxChars ?? 700;
  const maxValue = options.maxValueChars ?? 200;
  if (args === undefined || args === null) return '(no arguments)';
  if (typeof args !== 'object' || Array.isArray(args)) return clip(oneLine(JSON.stringify(args)), maxValue);
  const entries = Object.entries(args as Record<string, unknown>);
  if (entries.length === 0) return '(no arguments)';
  const lines: string[] = [];
  let used = 0;
  for (const [i, [key, value]] of entries.entries()) {
    const line = `${key}: ${describeValue(value, maxValue)}`;
    if (used + line.length > maxChars) {
      lines.push(`… and ${entries.length - i} more`);
      break;
    }
    lines.push(line);
    used += line.length + 1;
  }
  return lines.join('\n');
}

function describeValue(value: unknown, max: number): string {
  if (typeof value === 'string') {
    const flat = oneLine(value);
    return flat.length > max ? `"${flat.slice(0, max)}…" (${value.length} characters)` : `"${flat}"`;
  }
  if (Array.isArray(value)) {
    const text = oneLine(JSON.stringify(value));
    return text.length > max ? `${text.slice(0, max)}… (${value.length} items)` : text;
  }
  return clip(oneLine(JSON.stringify(value) ?? String(value)), max);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ⏎ ');
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
