import fs from 'node:fs/promises';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';

/**
 * The one path resolver for everything that touches the persona's files: file tools, `send_message` attachments
 * and `shell_exec`'s folder. Refuses anything outside the workspace (`..`, absolute paths elsewhere, symlinks
 * pointing out), hard links (which may be another name for a file outside), and secret files (`.env`). Throws an
 * Error whose message the model can read. The answer is a path, good for a look: a command may swap a folder on it
 * for a symlink a moment later, so whatever Parlor opens, writes or sends goes through workspace-io.ts.
 */
export async function resolveWorkspaceFile(persona: Persona, given: string, options: { maxBytes?: number } = {}): Promise<string> {
  const root = await fs.realpath(persona.workspace).catch(() => {
    throw new Error('this persona has no workspace folder');
  });
  const { real, stat } = await resolveInside(root, given);
  if (path.basename(real).startsWith('.env')) throw new Error(`"${given}" is a secrets file and cannot be used`);
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
export async function resolveWorkspaceFolder(persona: Persona, given?: string): Promise<string> {
  await fs.mkdir(persona.workspace, { recursive: true });
  const root = await fs.realpath(persona.workspace);
  if (given === undefined) return root;
  const { real, stat } = await resolveInside(root, given);
  if (!stat.isDirectory()) throw new Error(`"${given}" is not a folder`);
  return real;
}

async function resolveInside(root: string, given: string): Promise<{ real: string; stat: import('node:fs').Stats }> {
  const candidate = path.resolve(root, given);
  if (!isInside(root, candidate)) throw new Error(`"${given}" is outside the workspace`);
  let real: string;
  try {
    real = await fs.realpath(candidate);
  } catch {
    throw new Error(`"${given}" does not exist in the workspace`);
  }
  if (!isInside(root, real)) throw new Error(`"${given}" leads outside the workspace`);
  // Gone since (a command running beside the tool): said as plainly as a path that never was.
  const stat = await fs.stat(real).catch(() => {
    throw new Error(`"${given}" does not exist in the workspace`);
  });
  return { real, stat };
}

/** Whether `target` is `root` or below it. `..notes.txt` is a name inside; only a `..` component leads out. */
export function isInside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  if (relative === '') return true;
  if (path.isAbsolute(relative)) return false;
  return relative !== '..' && !relative.startsWith(`..${path.sep}`);
}
