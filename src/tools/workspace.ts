import fs from 'node:fs/promises';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';

/**
 * Resolves a path a tool was given inside the persona's workspace. Refuses anything outside it (`..`, absolute
 * paths elsewhere, symlinks pointing out) and secret files (`.env`). Throws an Error whose message the model can
 * read.
 */
export async function resolveWorkspaceFile(persona: Persona, given: string, options: { maxBytes?: number } = {}): Promise<string> {
  const root = await fs.realpath(persona.workspace).catch(() => {
    throw new Error('this persona has no workspace folder');
  });
  const candidate = path.resolve(root, given);
  if (!isInside(root, candidate)) throw new Error(`"${given}" is outside the workspace`);
  let real: string;
  try {
    real = await fs.realpath(candidate);
  } catch {
    throw new Error(`"${given}" does not exist in the workspace`);
  }
  if (!isInside(root, real)) throw new Error(`"${given}" leads outside the workspace`);
  if (path.basename(real).startsWith('.env')) throw new Error(`"${given}" is a secrets file and cannot be used`);
  const stat = await fs.stat(real);
  if (!stat.isFile()) throw new Error(`"${given}" is not a file`);
  if (options.maxBytes !== undefined && stat.size > options.maxBytes) {
    throw new Error(`"${given}" is ${stat.size} bytes, over the ${options.maxBytes}-byte limit`);
  }
  return real;
}

function isInside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}
