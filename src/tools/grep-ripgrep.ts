import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';
import type { FileHits, GrepHits, GrepQuery } from './grep-search.ts';
import { textLines } from './grep-search.ts';
import type { WorkspaceRules } from './workspace.ts';
import { SKIPPED_FOLDERS } from './workspace-walk.ts';

/** ripgrep's path on PATH, or undefined when it is not installed. */
export function findRipgrep(searchPath = process.env.PATH ?? ''): string | undefined {
  for (const dir of searchPath.split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'rg');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

interface RgLine {
  type: string;
  data?: { path?: { text?: string }; lines?: { text?: string }; line_number?: number };
}

/**
 * Searches with ripgrep, run as Parlor (root, outside the sandbox) in the workspace, never through a shell:
 * `--no-follow`, no ignore files or config (the JavaScript search reads neither), `.env*`, `.git` and
 * `node_modules` left out by glob, sorted by path. Stops reading once more than maxResults lines matched.
 *
 * ripgrep opens folders by path, so a command swapping one for a symlink during the walk could show it a file
 * outside. What it reports is therefore only a lead: every file with hits is read again through workspace-io.ts
 * and kept only if its lines are the ones ripgrep saw. Undefined when ripgrep could not search (a pattern its
 * regex engine does not take, say): the caller searches in JavaScript instead, in a worker with a deadline, since
 * such a pattern (a look-ahead before nested repeats) may be one that backtracks without end.
 */
export async function searchWithRipgrep(
  rg: string,
  persona: Persona,
  root: string,
  base: { real: string; isFile: boolean },
  query: GrepQuery,
  options: WorkspaceRules & { signal?: AbortSignal; skipFolders?: boolean },
): Promise<GrepHits | undefined> {
  const args = ['--json', '--no-config', '--no-follow', '--hidden', '--no-ignore', '--sort', 'path', '--max-filesize', '10M'];
  args.push('--glob', '!.env*');
  if (options.skipFolders !== false) for (const name of SKIPPED_FOLDERS) args.push('--glob', `!${name}`);
  args.push(query.ignoreCase ? '--ignore-case' : '--case-sensitive');
  if (query.literal) args.push('--fixed-strings');
  if (query.context > 0) args.push('--context', String(query.context));
  const relative = path.relative(root, base.real);
  // ripgrep matches a glob with a slash against the path it prints (from the workspace); include is relative to the
  // folder searched, as the JavaScript search reads it.
  if (query.include) args.push('--glob', query.include.includes('/') && relative && !base.isFile ? `${relative}/${query.include}` : query.include);
  args.push('--', query.pattern);
  if (relative) args.push(relative);

  // Loaded with the first search (execa is a hundred modules), as the shell tools load it.
  const { execa } = await import('execa');
  const child = execa(rg, args, { cwd: root, buffer: false, stdin: 'ignore', reject: false, cancelSignal: options.signal, stripFinalNewline: false });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < 2000) stderr += chunk.toString();
  });
  const byPath = new Map<string, FileHits>();
  let total = 0;
  for await (const line of child.iterable({ from: 'stdout' })) {
    let event: RgLine;
    try {
      event = JSON.parse(line) as RgLine;
    } catch {
      continue;
    }
    if (event.type !== 'match' && event.type !== 'context') continue;
    const file = event.data?.path?.text;
    const number = event.data?.line_number;
    const text = event.data?.lines?.text;
    if (file === undefined || number === undefined || text === undefined) continue;
    const name = path.normalize(file);
    let hits = byPath.get(name);
    if (!hits) byPath.set(name, (hits = { relative: name, matches: [], lines: new Map() }));
    hits.lines.set(number, text.replace(/\r?\n$/, ''));
    if (event.type === 'match') {
      hits.matches.push(number);
      if (++total > query.maxResults) break;
    }
  }
  child.kill();
  const result = await child;
  if (result.isCanceled) return { files: [], more: false };
  if (result.exitCode === 2 && byPath.size === 0 && /regex|parse|syntax/i.test(stderr)) return undefined;
  return { files: await confirmed(persona, [...byPath.values()], options), more: total > query.maxResults };
}

/** The files whose lines, read again through workspace-io, are what ripgrep reported (see above). */
async function confirmed(persona: Persona, files: FileHits[], rules: WorkspaceRules): Promise<FileHits[]> {
  const kept: FileHits[] = [];
  for (const file of files) {
    const lines = await textLines(persona, file.relative, rules);
    if (!lines) continue;
    if ([...file.lines].every(([number, text]) => lines[number - 1] === text)) kept.push(file);
  }
  return kept;
}
