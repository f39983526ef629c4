import { randomBytes } from 'node:crypto';
import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { WorkspaceRules } from './workspace.ts';
import { NEW_FILE, withWorkspaceFolder, writeAll, type WorkspaceFolder } from './workspace-io.ts';

/** A leftover of a write cut short older than this is removed by the next write of the same file. */
const STALE_PART_MS = 60_000;
const SETGID = 0o2000;

export class WorkspaceFileExistsError extends Error {
  override name = 'WorkspaceFileExistsError';
}

export interface WriteOptions {
  /** Replace a file already there (else WorkspaceFileExistsError). */
  overwrite: boolean;
  /** The resolver's rules, held again to the folder actually opened (another persona's folder swapped in since). */
  rules?: WorkspaceRules;
  /** Called once the new content is complete and synced, before it takes the target's name (crash tests). */
  beforeRename?: () => Promise<void>;
}

/**
 * Writes `content` to `relative` in the workspace, creating the folders on the way, so that the name shows the old
 * file or the new one and never a part: the content goes to a hidden file of its own beside it
 * (`.<name>.<random>.part`, opened O_EXCL|O_NOFOLLOW in the folder opened through workspace-io.ts), is synced,
 * then renamed over the target. A rename replaces a symlink swapped in at the name instead of writing through it.
 * A replaced file keeps its mode and owner (a file the shell user may edit stays so).
 */
export async function writeWorkspaceFile(workspace: string, relative: string, content: Buffer, options: WriteOptions): Promise<{ replaced: boolean }> {
  const name = path.basename(relative);
  return withWorkspaceFolder(workspace, path.dirname(relative), { create: true, rules: options.rules }, async (folder) => {
    const existing = await fs.lstat(folder.at(name)).catch(() => undefined);
    if (existing?.isDirectory()) throw new WorkspaceFileExistsError(`"${relative}" is a folder`);
    if (existing && !options.overwrite) throw new WorkspaceFileExistsError(`"${relative}" already exists`);
    if (existing && !existing.isFile() && !existing.isSymbolicLink()) throw new WorkspaceFileExistsError(`"${relative}" is not a regular file`);
    await removeStaleParts(folder, name);
    const kept = existing?.isFile() ? existing : undefined;
    const partial = `.${name.slice(0, 100)}.${randomBytes(4).toString('hex')}.part`;
    const out = await fs.open(folder.at(partial), NEW_FILE, 0o600);
    try {
      try {
        await writeAll(out, content, content.length);
        await keepModeAndOwner(out, kept, await folder.stat());
        await out.sync();
      } finally {
        await out.close();
      }
      await options.beforeRename?.();
      await fs.rename(folder.at(partial), folder.at(name));
    } catch (err) {
      await fs.unlink(folder.at(partial)).catch(() => {});
      throw err;
    }
    await folder.sync();
    return { replaced: existing !== undefined };
  });
}

async function keepModeAndOwner(out: fs.FileHandle, existing: Stats | undefined, parent: Stats): Promise<void> {
  if (existing) {
    await out.chmod(existing.mode & 0o7777);
    // Only root may give a file away; anyone else writes files of their own, as a plain write would.
    if (process.getuid?.() === 0) await out.chown(existing.uid, existing.gid);
    return;
  }
  // A folder shared with the shell user (set-group-ID, see shell-user-files.ts) gives its files group write.
  await out.chmod(parent.mode & SETGID ? 0o664 : 0o644);
}

/** Removes the hidden parts of writes of `name` that a crash left behind (old enough not to be another's, running). */
async function removeStaleParts(folder: WorkspaceFolder, name: string): Promise<void> {
  const prefix = `.${name.slice(0, 100)}.`;
  const names = await folder.names().catch(() => [] as string[]);
  for (const entry of names) {
    if (!entry.startsWith(prefix) || !/^[0-9a-f]{8}\.part$/.test(entry.slice(prefix.length))) continue;
    const stat = await fs.lstat(folder.at(entry)).catch(() => undefined);
    if (stat?.isFile() && Date.now() - stat.mtimeMs > STALE_PART_MS) await fs.unlink(folder.at(entry)).catch(() => {});
  }
}
