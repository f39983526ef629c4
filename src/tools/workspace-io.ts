import { randomBytes } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { isInside, isSecretName, otherPersonaDirs, type WorkspaceRules } from './workspace.ts';

/**
 * Everything Parlor itself (root, outside the sandbox) writes into, deletes from or opens in a persona's workspace
 * goes through here. A sandboxed command may change the workspace at any moment, including swapping a folder for a
 * symlink to /etc/cron.d in a loop while a download runs, so a path that was checked is worth nothing a moment later.
 *
 * How: every step down from the workspace is opened relative to the folder opened before it, through
 * `/proc/self/fd/<fd>/<name>` (Node has no openat), with O_NOFOLLOW, and each opened folder is checked, by its real
 * path (readlink of its fd), against the resolver's rules: in the workspace, not a secrets folder (`.env*`), not
 * another persona's folder inside the workspace. A symlink put in place after the look is then refused, never
 * followed; a folder swapped in after the look is judged by what was opened, not by the path that was checked; and
 * nothing is created anywhere before the folder it goes in is known to be one the persona may write in. Creating
 * the file first and checking where it landed afterwards would already have left an empty file outside (an empty
 * /etc/nologin locks everyone else out); running bubblewrap for each file would cost a process per write.
 * Folders cannot leave the workspace meanwhile: a sandboxed rename or hard link across its bind mount is EXDEV.
 *
 * Off Linux (macOS) the steps are plain paths checked with lstat. That is racy, but there is no sandbox there
 * either: a command runs only when its owner chose "shell": "unsandboxed", and can write anywhere Parlor can.
 */

export class WorkspacePathError extends Error {
  override name = 'WorkspacePathError';
}

const PROC_FD = '/proc/self/fd';
const FOLDER = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** O_NONBLOCK: a FIFO put where a file was would otherwise hang the open. */
const READ_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
/** A file of Parlor's own, never an existing one and never through a symlink. */
export const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
/** Bounds the walk of a folder's sizes, so a tree the sandbox built cannot keep Parlor busy. */
const MAX_ENTRIES = 100_000;
const MAX_DEPTH = 32;

/** Whether the steps go through /proc; on Linux without it (a container that hides it) nothing is written at all. */
function hasProcFd(): boolean {
  if (process.platform !== 'linux') return false;
  if (!existsSync(PROC_FD)) throw new WorkspacePathError('Parlor cannot write into the workspace safely without /proc (mount it)');
  return true;
}

/** An open folder of the workspace: `at(name)` names an entry of it that no later rename or symlink can redirect. */
interface Folder {
  /** The folder's real path when it was opened (for messages and the fallback without /proc). */
  real: string;
  /** Its path relative to the workspace. */
  relative: string;
  handle?: FileHandle;
  at(name: string): string;
  close(): Promise<void>;
}

/** Where every folder opened must lie, and where not (see refusal). */
interface Bounds {
  /** The workspace's real path. */
  root: string;
  /** Other personas' folders (real paths), which may lie inside the workspace. */
  others: readonly string[];
}

async function openRoot(workspace: string, create = false, rules: WorkspaceRules = {}): Promise<{ root: string; bounds: Bounds; folder: Folder }> {
  // The workspace's parent is the persona's folder, which no command can write: made by path, like the tools do.
  if (create) await fs.mkdir(workspace, { recursive: true });
  const root = await fs.realpath(workspace).catch(() => {
    throw new WorkspacePathError('this persona has no workspace folder');
  });
  const bounds = { root, others: await otherPersonaDirs(root, rules) };
  if (!hasProcFd()) return { root, bounds, folder: plainFolder(root, '') };
  const handle = await fs.open(root, constants.O_RDONLY | constants.O_DIRECTORY);
  const folder = fdFolder(handle, root, '');
  // The workspace itself is a bind mount point in the sandbox, which cannot rename it; checked all the same.
  if ((await fs.readlink(`${PROC_FD}/${handle.fd}`)) !== root) {
    await folder.close();
    throw new WorkspacePathError('the workspace folder changed while it was being opened');
  }
  return { root, bounds, folder };
}

/** Why what was opened at `real` (its real path) may not be used, as the resolver would say it; undefined if it may. */
function refusal(bounds: Bounds, real: string, relative: string): string | undefined {
  if (!real || !isInside(bounds.root, real)) return `"${relative}" leads outside the workspace`;
  if (path.relative(bounds.root, real).split(path.sep).some(isSecretName)) return `"${relative}" leads into a secrets folder (.env*)`;
  if (bounds.others.some((dir) => isInside(dir, real))) return `"${relative}" leads into another persona's folder`;
  return undefined;
}

function fdFolder(handle: FileHandle, real: string, relative: string): Folder {
  return { real, relative, handle, at: (name) => `${PROC_FD}/${handle.fd}/${name}`, close: () => handle.close() };
}

function plainFolder(real: string, relative: string): Folder {
  return { real, relative, at: (name) => path.join(real, name), close: async () => {} };
}

/** The folder at `components` below the workspace, created when `create` and missing; never through a symlink. */
async function openFolder(bounds: Bounds, top: Folder, components: readonly string[], create: boolean): Promise<Folder> {
  let folder = top;
  try {
    for (const name of components) {
      checkName(name);
      if (create) await fs.mkdir(folder.at(name), { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      const relative = path.join(folder.relative, name);
      const next = await openStep(bounds, folder, name, relative);
      if (folder !== top) await folder.close();
      folder = next;
    }
    return folder;
  } catch (err) {
    if (folder !== top) await folder.close();
    throw err;
  }
}

async function openStep(bounds: Bounds, parent: Folder, name: string, relative: string): Promise<Folder> {
  if (!parent.handle) {
    const full = path.join(parent.real, name);
    const stat = await fs.lstat(full).catch(() => undefined);
    if (!stat?.isDirectory()) throw new WorkspacePathError(`"${relative}" is not a folder in the workspace (a symlink, a file, or missing)`);
    const refused = refusal(bounds, full, relative);
    if (refused) throw new WorkspacePathError(refused);
    return plainFolder(full, relative);
  }
  let handle: FileHandle;
  try {
    handle = await fs.open(parent.at(name), FOLDER);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') {
      throw new WorkspacePathError(`"${relative}" is not a folder in the workspace (a symlink, a file, or missing)`, { cause: err });
    }
    throw err;
  }
  const real = await fs.readlink(`${PROC_FD}/${handle.fd}`).catch(() => '');
  const refused = refusal(bounds, real, relative);
  if (refused) {
    await handle.close();
    throw new WorkspacePathError(refused);
  }
  return fdFolder(handle, real, relative);
}

function checkName(name: string): void {
  if (!name || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) throw new WorkspacePathError(`"${name}" is not a file name`);
}

/**
 * The components of `relative` once the symlinks that stay in the workspace are followed (a persona may point
 * `uploads` at `data/in`), as far as the path exists; the rest are taken as they are, to be created. A symlink
 * leading out is refused here, and one swapped in after this look is refused by openFolder.
 */
async function realComponents(root: string, relative: string): Promise<string[]> {
  const candidate = path.resolve(root, relative);
  if (!isInside(root, candidate)) throw new WorkspacePathError(`"${relative}" is outside the workspace`);
  const missing: string[] = [];
  let existing = candidate;
  for (;;) {
    try {
      const real = await fs.realpath(existing);
      if (!isInside(root, real)) throw new WorkspacePathError(`"${path.relative(root, existing)}" leads outside the workspace`);
      return [...path.relative(root, real).split(path.sep).filter(Boolean), ...missing];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || existing === root) throw err;
      missing.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
}

/**
 * Moves `source`, a finished file in a folder of Parlor's own, to `name` in the folder `folder` of the workspace
 * (created when missing). Returns the saved file's path relative to the workspace.
 */
export async function placeWorkspaceFile(workspace: string, folder: string, name: string, source: string): Promise<string> {
  checkName(name);
  const { root, bounds, folder: top } = await openRoot(workspace, true);
  try {
    const target = await openFolder(bounds, top, await realComponents(root, folder), true);
    try {
      await moveInto(target, name, source);
      return path.join(target.relative, name);
    } finally {
      if (target !== top) await target.close();
    }
  } finally {
    await top.close();
  }
}

async function moveInto(folder: Folder, name: string, source: string): Promise<void> {
  // A rename replaces a symlink at `name` rather than following it.
  try {
    await fs.rename(source, folder.at(name));
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
  }
  // Another filesystem: copied in through a new file of our own (O_EXCL: never an existing one), then renamed.
  const partial = `.${name.slice(0, 100)}.${randomBytes(4).toString('hex')}.part`;
  const out = await fs.open(folder.at(partial), NEW_FILE, 0o644);
  try {
    const input = await fs.open(source, 'r');
    try {
      const buffer = Buffer.alloc(256 * 1024);
      for (let read; (read = (await input.read(buffer, 0, buffer.length, null)).bytesRead) > 0; ) await writeAll(out, buffer, read);
    } finally {
      await input.close();
    }
    await fs.rename(folder.at(partial), folder.at(name));
  } catch (err) {
    await fs.unlink(folder.at(partial)).catch(() => {});
    throw err;
  } finally {
    await out.close();
  }
  await fs.rm(source, { force: true });
}

/** Removes a file Parlor saved (at `relative`, as placeWorkspaceFile returned it); a folder changed since is left alone. */
export async function removeWorkspaceFile(workspace: string, relative: string): Promise<void> {
  const parts = path.normalize(relative).split(path.sep).filter(Boolean);
  const name = parts.pop();
  if (!name) return;
  const { bounds, folder: top } = await openRoot(workspace);
  try {
    const folder = await openFolder(bounds, top, parts, false).catch((err: unknown) => {
      if (err instanceof WorkspacePathError) return undefined;
      throw err;
    });
    if (!folder) return;
    try {
      // unlink removes a symlink itself, never what it points to.
      await fs.unlink(folder.at(name)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    } finally {
      if (folder !== top) await folder.close();
    }
  } finally {
    await top.close();
  }
}

/** Bytes of the regular files in a workspace folder and below it (symlinks not followed); 0 when it is missing. */
export async function workspaceFolderBytes(workspace: string, relative: string): Promise<number> {
  if (!existsSync(workspace)) return 0;
  const { root, bounds, folder: top } = await openRoot(workspace);
  try {
    let components: string[];
    try {
      components = await realComponents(root, relative);
    } catch (err) {
      if (err instanceof WorkspacePathError) return 0;
      throw err;
    }
    const folder = await openFolder(bounds, top, components, false).catch(() => undefined);
    if (!folder) return 0;
    const budget = { entries: MAX_ENTRIES };
    try {
      return await folderBytes(bounds, folder, 0, budget);
    } finally {
      if (folder !== top) await folder.close();
    }
  } finally {
    await top.close();
  }
}

async function folderBytes(bounds: Bounds, folder: Folder, depth: number, budget: { entries: number }): Promise<number> {
  const names = await fs.readdir(folder.handle ? `${PROC_FD}/${folder.handle.fd}` : folder.real).catch(() => [] as string[]);
  let total = 0;
  for (const name of names) {
    if (--budget.entries < 0) return total;
    const stat = await fs.lstat(folder.at(name)).catch(() => undefined);
    if (stat?.isFile()) total += stat.size;
    else if (stat?.isDirectory() && depth < MAX_DEPTH) {
      const child = await openStep(bounds, folder, name, path.join(folder.relative, name)).catch(() => undefined);
      if (!child) continue;
      try {
        total += await folderBytes(bounds, child, depth + 1, budget);
      } finally {
        await child.close();
      }
    }
  }
  return total;
}

/**
 * Opens a workspace file for reading without following anything a command may have swapped in since `real` (its
 * real path, from resolveWorkspaceFile) was resolved. The caller checks what it got (fstat) and closes it.
 */
export async function openWorkspaceFileForReading(workspace: string, real: string, rules: WorkspaceRules = {}): Promise<FileHandle> {
  const { root, bounds, folder: top } = await openRoot(workspace, false, rules);
  try {
    if (!isInside(root, real) || real === root) throw new WorkspacePathError(`"${real}" is outside the workspace`);
    const parts = path.relative(root, real).split(path.sep);
    const name = parts.pop()!;
    const folder = await openFolder(bounds, top, parts, false);
    try {
      let handle: FileHandle;
      try {
        handle = await fs.open(folder.at(name), READ_FILE);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ELOOP' || code === 'ENOENT') throw new WorkspacePathError(`"${path.join(folder.relative, name)}" changed while it was being opened`, { cause: err });
        throw err;
      }
      if (hasProcFd()) {
        const opened = await fs.readlink(`${PROC_FD}/${handle.fd}`).catch(() => '');
        const refused = refusal(bounds, opened, path.join(folder.relative, name));
        if (refused) {
          await handle.close();
          throw new WorkspacePathError(refused);
        }
      }
      return handle;
    } finally {
      if (folder !== top) await folder.close();
    }
  } finally {
    await top.close();
  }
}

/**
 * A folder of the workspace, opened as above: `at(name)` names an entry of it that no later rename or symlink can
 * redirect, `child(name)` opens a folder in it (never through a symlink).
 */
export interface WorkspaceFolder {
  /** The workspace's real path. */
  readonly root: string;
  /** The folder's path relative to the workspace ('' for the workspace itself). */
  readonly relative: string;
  at(name: string): string;
  names(): Promise<string[]>;
  child(name: string): Promise<WorkspaceFolder>;
  stat(): Promise<import('node:fs').Stats>;
  /** Makes the folder's entries (a rename into it) durable. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

function workspaceFolder(bounds: Bounds, folder: Folder): WorkspaceFolder {
  return {
    root: bounds.root,
    relative: folder.relative,
    at: (name) => folder.at(name),
    names: () => fs.readdir(folder.handle ? `${PROC_FD}/${folder.handle.fd}` : folder.real),
    child: async (name) => {
      checkName(name);
      return workspaceFolder(bounds, await openStep(bounds, folder, name, path.join(folder.relative, name)));
    },
    stat: () => (folder.handle ? folder.handle.stat() : fs.stat(folder.real)),
    sync: async () => {
      await folder.handle?.sync().catch(() => {});
    },
    close: () => folder.close(),
  };
}

/**
 * Runs `use` with the folder at `relative` in the workspace (symlinks that stay inside followed, as far as the path
 * exists; created when `create`), and closes it afterwards. Every folder opened on the way and below, through
 * `child`, is held to `rules` as it is opened: a command may have swapped one since the resolver looked.
 */
export async function withWorkspaceFolder<T>(
  workspace: string,
  relative: string,
  options: { create?: boolean; rules?: WorkspaceRules },
  use: (folder: WorkspaceFolder) => Promise<T>,
): Promise<T> {
  const create = options.create ?? false;
  const { root, bounds, folder: top } = await openRoot(workspace, create, options.rules);
  try {
    const folder = await openFolder(bounds, top, await realComponents(root, relative), create);
    try {
      return await use(workspaceFolder(bounds, { ...folder, close: async () => {} }));
    } finally {
      if (folder !== top) await folder.close();
    }
  } finally {
    await top.close();
  }
}

/** Writes the first `length` bytes of `buffer` whole: a short write (a disk filling up) would otherwise cut the file. */
export async function writeAll(out: FileHandle, buffer: Buffer, length: number): Promise<void> {
  for (let offset = 0; offset < length; ) offset += (await out.write(buffer, offset, length - offset)).bytesWritten;
}
