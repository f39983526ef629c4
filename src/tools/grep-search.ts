import path from 'node:path';
import picomatch from 'picomatch';
import type { Persona } from '#src/config/persona.ts';
import { GrepPatternTooSlowError, matchInWorker, matchOnThread } from './grep-worker.ts';
import { OutputBudget } from './text-lines.ts';
import type { WorkspaceRules } from './workspace.ts';
import { MAX_READ_BYTES, readWorkspaceFile } from './workspace-read.ts';
import { comparePaths, walkWorkspace } from './workspace-walk.ts';

/**
 * The search behind `grep`, in JavaScript; grep-ripgrep.ts does the same with ripgrep where it is installed. Both
 * hand back the same FileHits, so the model reads one format whichever ran.
 */

export const MAX_GREP_LINE_CHARS = 500;

export interface GrepQuery {
  pattern: string;
  literal: boolean;
  ignoreCase: boolean;
  /** A glob the file's path (relative to the folder searched) or, without a slash, its name must match. */
  include?: string;
  context: number;
  maxResults: number;
  regex: RegExp;
}

/** A file's matching lines, and the lines around them that were seen (context). */
export interface FileHits {
  /** Relative to the workspace. */
  relative: string;
  matches: number[];
  lines: Map<number, string>;
}

export interface GrepHits {
  files: FileHits[];
  /** More matches were found than maxResults. */
  more: boolean;
}

/** The query, or an error the model can read (an invalid regular expression). */
export function compileQuery(args: Omit<GrepQuery, 'regex'>): GrepQuery | { error: string } {
  const source = args.literal ? args.pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : args.pattern;
  const flags = args.ignoreCase ? 'i' : '';
  try {
    return { ...args, regex: new RegExp(source, `${flags}u`) };
  } catch {
    // Without the u flag, a few escapes models write (`\-`, a lone `{`) are fine.
    try {
      return { ...args, regex: new RegExp(source, flags) };
    } catch (err) {
      return { error: `"${args.pattern}" is not a valid regular expression (${(err as Error).message}); fix it, or set literal: true to search for the text as it is` };
    }
  }
}

/** The include glob as a matcher of paths relative to the folder searched, as ripgrep's --glob reads it. */
export function includeMatcher(include: string | undefined): (relative: string) => boolean {
  if (!include) return () => true;
  return picomatch(include, { dot: true, basename: !include.includes('/') });
}

/**
 * Searches the files under `base` (a real path: a folder or one file) in the workspace `root`, in path order, until
 * more than maxResults lines matched. Files too large, binary (a NUL byte) or not to be read are passed over.
 * A regular expression runs in a worker with a deadline (grep-worker.ts); the answer is then an error the model
 * can read when it backtracks past it. Plain text cannot, so it is matched here, without a worker's start-up.
 */
export async function searchWithJs(
  persona: Persona,
  root: string,
  base: { real: string; isFile: boolean },
  query: GrepQuery,
  options: WorkspaceRules & { signal?: AbortSignal; skipFolders?: boolean; deadlineMs?: number },
): Promise<GrepHits | { error: string }> {
  let relatives: string[];
  if (base.isFile) {
    relatives = [path.relative(root, base.real)];
  } else {
    const include = includeMatcher(query.include);
    const walked = await walkWorkspace(root, base.real, ['**'], options);
    relatives = walked
      .filter((file) => file.stat.size <= MAX_READ_BYTES && include(path.relative(base.real, path.join(root, file.relative))))
      .map((file) => file.relative)
      .sort(comparePaths);
  }
  const files: FileHits[] = [];
  let total = 0;
  const matcher = isPlainText(query) ? matchOnThread(query.regex) : matchInWorker(query.regex, { deadlineMs: options.deadlineMs, signal: options.signal });
  let current = '';
  try {
    for (const relative of relatives) {
      if (options.signal?.aborted) break;
      current = relative;
      const lines = await textLines(persona, relative, options);
      if (!lines) continue;
      const matches = await matcher.match(lines, query.maxResults + 1 - total);
      if (!matches.length) continue;
      total += matches.length;
      const hits: FileHits = { relative, matches: matches.map((index) => index + 1), lines: new Map() };
      lines.forEach((line, index) => hits.lines.set(index + 1, line));
      files.push(hits);
      if (total > query.maxResults) break;
    }
  } catch (err) {
    if (!(err instanceof GrepPatternTooSlowError)) throw err;
    return {
      error:
        `the pattern took too long on "${current}" (over ${err.deadlineMs / 1000} s): it backtracks without end on some lines, ` +
        'as nested repeats like (a+)+ do; simplify it, or use literal: true to search for plain text',
    };
  } finally {
    await matcher.close();
  }
  return { files, more: total > query.maxResults };
}

/** Text with nothing a regular expression could repeat or backtrack on: `literal`, or a pattern such as `TODO`. */
function isPlainText(query: GrepQuery): boolean {
  return query.literal || !/[.*+?^${}()|[\]\\]/.test(query.pattern);
}

/** A workspace file's lines, read through workspace-io; undefined for one that cannot be (binary, too big, gone). */
export async function textLines(persona: Persona, relative: string, rules: WorkspaceRules): Promise<string[] | undefined> {
  const content = await readWorkspaceFile(persona, relative, rules).catch(() => undefined);
  if (!content || content.bytes.includes(0)) return undefined;
  // Lossy, as ripgrep reads a file that is not quite UTF-8.
  const text = new TextDecoder('utf-8').decode(content.bytes);
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/**
 * The hits as `path:line:text` for a matching line and `path-line-text` for one around it, groups apart by `--`
 * (as grep and ripgrep print them), the first maxResults matches only, within the output budget.
 */
export function formatHits(hits: GrepHits, query: GrepQuery): string {
  const budget = new OutputBudget();
  let left = query.maxResults;
  let shown = 0;
  let full = false;
  outer: for (const file of hits.files) {
    const kept = file.matches.slice(0, left);
    left -= kept.length;
    const matched = new Set(kept);
    const wanted = new Set<number>();
    for (const line of kept) for (let n = line - query.context; n <= line + query.context; n++) if (file.lines.has(n)) wanted.add(n);
    let previous: number | undefined;
    for (const n of [...wanted].sort((a, b) => a - b)) {
      if (query.context > 0 && (previous !== undefined ? n !== previous + 1 : budget.lines.length > 0)) {
        if (!budget.add('--')) break outer;
      }
      const text = file.lines.get(n)!;
      const cut = text.length > MAX_GREP_LINE_CHARS ? `${text.slice(0, MAX_GREP_LINE_CHARS)}… [${text.length - MAX_GREP_LINE_CHARS} more characters]` : text;
      if (!budget.add(`${file.relative}${matched.has(n) ? ':' : '-'}${n}${matched.has(n) ? ':' : '-'}${cut}`)) {
        full = true;
        break outer;
      }
      if (matched.has(n)) shown++;
      previous = n;
    }
    if (left === 0) break;
  }
  const total = hits.files.reduce((sum, file) => sum + file.matches.length, 0);
  if (full) return `${budget.text()}\n[output cut after ${shown} matching lines; narrow the pattern, the path or include, or use less context]`;
  if (hits.more || total > query.maxResults) {
    return `${budget.text()}\n[the first ${shown} matching lines shown, there are more; narrow the pattern, the path or include, or raise max_results (up to 500)]`;
  }
  return budget.text();
}
