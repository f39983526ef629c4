import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';

/**
 * The one path resolver for everything that touches the persona's files: file tools, `send_message` attachments
 * and `shell_exec`'s folder. Refuses anything outside the workspace (`..`, absolute paths elsewhere, symlinks
 * pointing out), hard links (which may be another name for a file outside), secret files (`.env*`), other
 * personas' folders and paths that only look harmless until they are URL-decoded. Throws an Error whose message
 * the model can read. The answer is a path, good for a look: a command may swap a folder on it for a symlink a
 * moment later, so whatever Parlor opens, writes or sends goes through workspace-io.ts.
 */

/** What every caller may add to the rules. */
export interface WorkspaceRules {
  /**
   * Every persona's folder (as `createBuiltinTools` receives them). Another persona's folder is refused even where
   * it lies inside this workspace (a workspace that holds the personas folder).
   */
  personaDirs?: readonly string[];
}

export async function resolveWorkspaceFile(persona: Persona, given: string, options: { maxBytes?: number } & WorkspaceRules = {}): Promise<string> {
  const { real, stat } = await resolveWorkspaceEntry(persona, given, options);
  if (!stat.isFile()) throw new Error(`"${given}" is not a file`);
  // A hard link looks like any file of the workspace but may be a second name for one outside it (a `.env`, a
  // database password). Nothing tells the two names apart, so a file with more than one name is refused.
  if (stat.nlink > 1) {
    throw new Error(`"${given}" has ${stat.nlink} hard links, so it may be a file from outside the workspace; copy it (cp) and use the copy`);
  }
  if (options.maxBytes !== undefined && stat.size > options.maxBytes) {
    throw new Error(`"${given}" is ${stat.size} bytes, over the ${options.maxBytes}-byte limit`);
  }
  return real;
}

/**
 * The real path of a folder inside the persona's workspace, or of the workspace itself (created when missing)
 * when none is given.
 */
export async function resolveWorkspaceFolder(persona: Persona, given?: string, rules: WorkspaceRules = {}): Promise<string> {
  await fs.mkdir(persona.workspace, { recursive: true });
  if (given === undefined) return fs.realpath(persona.workspace);
  const { real, stat } = await resolveWorkspaceEntry(persona, given, rules);
  if (!stat.isDirectory()) throw new Error(`"${given}" is not a folder`);
  return real;
}

/** Something that exists in the workspace (a file, a folder, anything), by its real path. */
export async function resolveWorkspaceEntry(persona: Persona, given: string, rules: WorkspaceRules = {}): Promise<{ root: string; real: string; stat: Stats }> {
  const root = await workspaceRoot(persona);
  const candidate = checkedCandidate(root, given);
  let real: string;
  try {
    real = await fs.realpath(candidate);
  } catch {
    throw new Error(`"${given}" does not exist in the workspace`);
  }
  await checkReal(root, real, given, rules);
  // Gone since (a command running beside the tool): said as plainly as a path that never was.
  const stat = await fs.stat(real).catch(() => {
    throw new Error(`"${given}" does not exist in the workspace`);
  });
  return { root, real, stat };
}

/**
 * Where a file is to be written: its real path once the symlinks that stay inside are followed, as far as the
 * path exists (the rest is to be created), and what is there now (undefined: nothing yet).
 */
export async function resolveWorkspaceTarget(persona: Persona, given: string, rules: WorkspaceRules = {}): Promise<{ root: string; real: string; relative: string; stat?: Stats }> {
  const root = await workspaceRoot(persona);
  const candidate = checkedCandidate(root, given);
  if (candidate === root) throw new Error(`"${given}" is the workspace itself, not a file`);
  const missing: string[] = [];
  let existing = candidate;
  for (;;) {
    const real = await fs.realpath(existing).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw new Error(`"${given}" cannot be reached (${err.code ?? err.message})`);
      return undefined;
    });
    if (real !== undefined) {
      const full = path.join(real, ...missing);
      await checkReal(root, full, given, rules);
      const stat = missing.length ? undefined : await fs.stat(full).catch(() => undefined);
      return { root, real: full, relative: path.relative(root, full), stat };
    }
    // A dangling symlink is not a place to create a file through: where it points may be anywhere.
    if (await fs.lstat(existing).then((s) => s.isSymbolicLink(), () => false)) throw new Error(`"${given}" goes through a symlink that points nowhere; remove it or give another path`);
    missing.unshift(path.basename(existing));
    existing = path.dirname(existing);
  }
}

/** Whether `target` is `root` or below it. `..notes.txt` is a name inside; only a `..` component leads out. */
export function isInside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  if (relative === '') return true;
  if (path.isAbsolute(relative)) return false;
  return relative !== '..' && !relative.startsWith(`..${path.sep}`);
}

/** `.env`, `.env.local`, `.envrc`...: secrets, which no file tool reads, writes or lists. */
export function isSecretName(name: string): boolean {
  return name.startsWith('.env');
}

/**
 * Refuses a path Parlor should not even look at. A path is used as it is written (a file may be called
 * `50%.txt`), but one that percent-decodes to something else must pass the same rules decoded: `%2e%2e%2f` is
 * how a link or a confused model spells `../`, and whatever reads the path next may decode it.
 */
export function checkGivenPath(given: string): void {
  if (given.includes('\0')) throw new Error('the path contains a NUL byte; give a plain path');
  let decoded: string;
  try {
    decoded = decodeURIComponent(given);
  } catch {
    return;
  }
  if (decoded === given) return;
  const parts = decoded.split(/[/\\]/);
  if (decoded.includes('\0') || parts.includes('..') || parts.some(isSecretName) || path.isAbsolute(decoded) !== path.isAbsolute(given)) {
    throw new Error(`"${given}" is URL-encoded and decodes to "${decoded.replaceAll('\0', '\\0')}", which is not allowed; give the plain path inside the workspace`);
  }
}

async function workspaceRoot(persona: Persona): Promise<string> {
  return fs.realpath(persona.workspace).catch(() => {
    throw new Error('this persona has no workspace folder');
  });
}

function checkedCandidate(root: string, given: string): string {
  checkGivenPath(given);
  const candidate = path.resolve(root, given);
  if (!isInside(root, candidate)) throw new Error(`"${given}" is outside the workspace`);
  if (path.relative(root, candidate).split(path.sep).some(isSecretName)) throw new Error(`"${given}" is a secrets file and cannot be used`);
  return candidate;
}

async function checkReal(root: string, real: string, given: string, rules: WorkspaceRules): Promise<void> {
  if (!isInside(root, real)) throw new Error(`"${given}" leads outside the workspace`);
  if (path.relative(root, real).split(path.sep).some(isSecretName)) throw new Error(`"${given}" is a secrets file and cannot be used`);
  if (await inOtherPersonaDir(root, real, rules)) throw new Error(`"${given}" is in another persona's folder`);
}

/** Whether `real` lies in a persona's folder that does not hold this workspace (so: another persona's). */
export async function inOtherPersonaDir(root: string, real: string, rules: WorkspaceRules): Promise<boolean> {
  return (await otherPersonaDirs(root, rules)).some((dir) => isInside(dir, real));
}

/** The real paths of the persona folders that do not hold the workspace `root`: other personas'. */
export async function otherPersonaDirs(root: string, rules: WorkspaceRules): Promise<string[]> {
  const others: string[] = [];
  for (const dir of rules.personaDirs ?? []) {
    const realDir = await fs.realpath(dir).catch(() => path.resolve(dir));
    if (!isInside(realDir, root)) others.push(realDir);
  }
  return others;
}
