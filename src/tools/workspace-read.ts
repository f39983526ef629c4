import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';
import { formatBytes } from './text-lines.ts';
import { resolveWorkspaceFile, type WorkspaceRules } from './workspace.ts';
import { openWorkspaceFileForReading, WorkspacePathError } from './workspace-io.ts';

/** The most a file tool reads of one file: past it, commands (head, sed, split) are the way in. */
export const MAX_READ_BYTES = 10 * 1024 * 1024;

export interface WorkspaceFileContent {
  /** Its path relative to the workspace. */
  relative: string;
  bytes: Buffer;
  stat: Stats;
}

/**
 * The whole of a workspace file, after the resolver's checks, read through the handle workspace-io opened (so what
 * is read is what was checked, whatever a command swapped in since). Throws an Error the model can read.
 */
export async function readWorkspaceFile(persona: Persona, given: string, options: WorkspaceRules & { maxBytes?: number } = {}): Promise<WorkspaceFileContent> {
  const maxBytes = options.maxBytes ?? MAX_READ_BYTES;
  const real = await resolveWorkspaceFile(persona, given, { personaDirs: options.personaDirs });
  const handle = await openWorkspaceFileForReading(persona.workspace, real, { personaDirs: options.personaDirs }).catch((err: unknown) => {
    if (err instanceof WorkspacePathError) throw new Error(`"${given}" changed while it was being opened (a folder on its path was replaced); try again`, { cause: err });
    throw err;
  });
  try {
    const stat = await handle.stat();
    // A FIFO or device swapped in after the look (the open did not wait: O_NONBLOCK).
    if (!stat.isFile()) throw new Error(`"${given}" is not a regular file`);
    if (stat.nlink > 1) throw new Error(`"${given}" has ${stat.nlink} hard links, so it may be a file from outside the workspace; copy it (cp) and use the copy`);
    if (stat.size > maxBytes) throw tooLarge(given, stat.size, maxBytes);
    const bytes = Buffer.alloc(stat.size);
    let length = 0;
    while (length < bytes.length) {
      const { bytesRead } = await handle.read(bytes, length, bytes.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    // Still growing while it is read: the part that fitted is what there was when it was opened.
    return { relative: path.relative(await fs.realpath(persona.workspace), real), bytes: bytes.subarray(0, length), stat };
  } finally {
    await handle.close();
  }
}

export function tooLarge(given: string, size: number, maxBytes: number): Error {
  return new Error(
    `"${given}" is ${formatBytes(size)}, over the ${formatBytes(maxBytes)} a file tool reads; look at parts of it with shell_exec (head, tail, sed -n '100,200p') or search it with grep`,
  );
}

/** `%PDF-` at the start: a PDF, whatever its name says. */
export function isPdf(bytes: Uint8Array): boolean {
  return bytes.length >= 5 && Buffer.from(bytes.subarray(0, 5)).toString('latin1') === '%PDF-';
}
