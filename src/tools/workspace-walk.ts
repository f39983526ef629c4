import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { glob } from 'tinyglobby';
import { checkGivenPath, inOtherPersonaDir, isInside, isSecretName, type WorkspaceRules } from './workspace.ts';

/** Folders the search tools skip unless the path names them: a repository's insides and installed packages. */
export const SKIPPED_FOLDERS = ['.git', 'node_modules'];
/** Never found, never searched: secrets (`.env*`), whatever the pattern says. */
const ALWAYS_IGNORED = ['**/.env*', '**/.env*/**'];

export interface WalkedFile {
  /** Its path relative to the workspace, as the model passes it to file_read. */
  relative: string;
  /** Where it really is (the same but for symlinks that stay inside). */
  real: string;
  stat: Stats;
}

/**
 * The files under `base` (a real folder in the workspace `root`) matching `patterns`, with tinyglobby. Symlinks are
 * neither followed nor listed (as ripgrep walks without --follow). Every result is checked again as the resolver
 * checks a path: a folder swapped for a symlink mid-walk would otherwise list names from outside.
 */
export async function walkWorkspace(
  root: string,
  base: string,
  patterns: readonly string[],
  options: WorkspaceRules & { signal?: AbortSignal; skipFolders?: boolean },
): Promise<WalkedFile[]> {
  const skipped = options.skipFolders === false ? [] : SKIPPED_FOLDERS.map((name) => `**/${name}/**`);
  const found = await glob([...patterns], {
    cwd: base,
    dot: true,
    onlyFiles: true,
    followSymbolicLinks: false,
    expandDirectories: false,
    ignore: [...ALWAYS_IGNORED, ...skipped],
    signal: options.signal,
  });
  const files: WalkedFile[] = [];
  for (const name of found) {
    const full = path.join(base, name);
    const real = await fs.realpath(full).catch(() => undefined);
    if (!real || !isInside(root, real)) continue;
    if (path.relative(root, real).split(path.sep).some(isSecretName)) continue;
    if (await inOtherPersonaDir(root, real, options)) continue;
    const stat = await fs.lstat(full).catch(() => undefined);
    if (!stat?.isFile()) continue;
    files.push({ relative: path.relative(root, full), real, stat });
  }
  return files;
}

/**
 * A glob pattern made relative to the folder searched (`base`, in the workspace `root`), or an Error the model can
 * read: no `..` segments (a pattern may not climb out), no absolute pattern outside the folder.
 */
export function workspacePattern(root: string, base: string, pattern: string): string {
  checkGivenPath(pattern);
  let relative = pattern;
  if (path.isAbsolute(pattern)) {
    if (!isInside(root, pattern)) throw new Error(`the pattern "${pattern}" is outside the workspace; give it relative to your workspace`);
    if (!isInside(base, pattern)) throw new Error(`the pattern "${pattern}" is outside the folder searched; give it relative to that folder`);
    relative = path.relative(base, pattern) || '**';
  }
  if (relative.split(/[/\\]/).includes('..')) throw new Error(`the pattern "${pattern}" has a ".." segment; patterns stay inside the folder searched`);
  return relative;
}

/** Orders paths as a directory walk sorted by name does (`a/b` before `a.txt`), the order ripgrep's --sort path gives. */
export function comparePaths(a: string, b: string): number {
  const left = a.split('/');
  const right = b.split('/');
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i] !== right[i]) return left[i] < right[i] ? -1 : 1;
  }
  return left.length - right.length;
}
