import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';
import { resolveWorkspaceFile, type WorkspaceRules } from './workspace.ts';
import { openWorkspaceFileForReading, WorkspacePathError, writeAll } from './workspace-io.ts';

/** How long a copy of a sent file is kept: long enough for a queued or retried send to find it. */
export const OUTGOING_RETENTION_MS = 24 * 3600_000;

/**
 * A file a tool sends is copied, when the tool runs, into a folder of Parlor's own that no command can see (under
 * Parlor's home, which the sandbox hides), and the ledger carries the copy's path. The connector opens the file
 * later (queued, retried, sent by another process): by then a command may have swapped a checked folder for a
 * symlink to Parlor's database password, so the workspace path is never opened again after this.
 *
 * The copy is named by its content and keeps the file's name (`<outgoing>/<sha256>/<name>`): the platform shows
 * that name, and a turn that runs again sends the same path, so the ledger still knows it as the same message.
 */
export async function snapshotWorkspaceFile(persona: Persona, given: string, options: { outgoingDir: string; maxBytes: number } & WorkspaceRules): Promise<string> {
  // The resolver's answers (outside, a .env, hard links, too large) are the model's to read; the open below then
  // holds to what was checked.
  const real = await resolveWorkspaceFile(persona, given, { maxBytes: options.maxBytes, personaDirs: options.personaDirs });
  const name = path.basename(real);
  const source = await openWorkspaceFileForReading(persona.workspace, real).catch((err: unknown) => {
    if (!(err instanceof WorkspacePathError)) throw err;
    throw new Error(`"${given}" changed while it was being opened (a folder on its path was replaced); nothing was sent`, { cause: err });
  });
  await fs.mkdir(options.outgoingDir, { recursive: true, mode: 0o700 });
  const partial = path.join(options.outgoingDir, `.${randomBytes(8).toString('hex')}.part`);
  try {
    const stat = await source.stat();
    if (!stat.isFile()) throw new Error(`"${given}" is not a file`);
    if (stat.nlink > 1) throw new Error(`"${given}" has ${stat.nlink} hard links, so it may be a file from outside the workspace; copy it (cp) and use the copy`);
    if (stat.size > options.maxBytes) throw new Error(`"${given}" is ${stat.size} bytes, over the ${options.maxBytes}-byte limit`);
    const hash = createHash('sha256');
    const out = await fs.open(partial, 'wx', 0o600);
    try {
      let total = 0;
      const buffer = Buffer.alloc(256 * 1024);
      for (;;) {
        const { bytesRead } = await source.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        total += bytesRead;
        // Still growing while it is read: whatever is cut off is not what the model meant to send.
        if (total > options.maxBytes) throw new Error(`"${given}" grew past the ${options.maxBytes}-byte limit while it was read`);
        hash.update(buffer.subarray(0, bytesRead));
        await writeAll(out, buffer, bytesRead);
      }
    } finally {
      await out.close();
    }
    const folder = path.join(options.outgoingDir, hash.digest('hex').slice(0, 32));
    const target = path.join(folder, name);
    // Twice: a sweep may remove an old folder of the same content between the mkdir and the rename.
    for (let attempt = 0; ; attempt++) {
      await fs.mkdir(folder, { recursive: true, mode: 0o700 });
      const now = new Date();
      await fs.utimes(folder, now, now).catch(() => {});
      try {
        await fs.rename(partial, target);
        return target;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt > 0) throw err;
      }
    }
  } finally {
    await source.close();
    await fs.rm(partial, { force: true });
  }
}

/** Removes the copies of sent files older than `before`; how many folders went. Safe to run from several processes. */
export async function pruneOutgoingFiles(outgoingDir: string, before: Date): Promise<number> {
  let names: string[];
  try {
    names = await fs.readdir(outgoingDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  let removed = 0;
  for (const name of names) {
    const full = path.join(outgoingDir, name);
    const stat = await fs.lstat(full).catch(() => undefined);
    if (!stat || stat.mtimeMs >= before.getTime()) continue;
    await fs.rm(full, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** A folder of this process's own for the copies, when the caller names none (tests, embedded uses). */
export async function privateOutgoingDir(): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), 'parlor-outgoing-'));
}
