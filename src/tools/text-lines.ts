/**
 * How the file tools show text to the model: numbered lines (`    12\tline`, as the reference coding agents do),
 * long lines cut, and the whole kept below the runner's cap (32,000 characters), so a tool says itself where it
 * stopped and how to read on instead of being cut mid-line.
 */

/** A line longer than this is cut, saying how much is left out. */
export const MAX_LINE_CHARS = 1000;
/** What one result may hold: below the runner's cap, leaving room for a closing note. */
export const OUTPUT_BUDGET_CHARS = 28_000;

/** The lines of a text; a final newline does not start another one. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

export function cutLine(line: string, max = MAX_LINE_CHARS): string {
  return line.length > max ? `${line.slice(0, max)}… [${line.length - max} more characters in this line]` : line;
}

/** A line as file_read shows it: its 1-based number right-aligned, a tab, the text. */
export function numberedLine(number: number, line: string, separator = '\t'): string {
  return `${String(number).padStart(6)}${separator}${cutLine(line)}`;
}

/** Lines added while they fit in a number of characters. */
export class OutputBudget {
  readonly lines: string[] = [];
  private used = 0;

  constructor(private readonly chars = OUTPUT_BUDGET_CHARS) {}

  /** Adds the line when it fits; false (and nothing added) when it does not. */
  add(line: string): boolean {
    if (this.used + line.length + 1 > this.chars) return false;
    this.lines.push(line);
    this.used += line.length + 1;
    return true;
  }

  text(): string {
    return this.lines.join('\n');
  }
}

/** 1234 → "1.2 KB": sizes as a person reads them. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** Text, or undefined for bytes that are not UTF-8 text (a NUL byte, or invalid UTF-8). */
export function decodeText(bytes: Uint8Array): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    // A byte order mark at the start is dropped (ignoreBOM: false).
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
