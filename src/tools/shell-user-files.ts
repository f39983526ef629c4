import { constants } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { ShellUser } from './shell-user.ts';

/**
 * What a command running as the shell user (see shell-user.ts) may write, and what it must not read. Linux only:
 * folders are walked through /proc/self/fd, as in workspace-io.ts, so a symlink is never followed.
 */

const PROC_FD = '/proc/self/fd';
const OPEN_FOLDER = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const OPEN_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const SETGID = 0o2000;
const GROUP_ALL = 0o070;
/** Bounds the first walk of a workspace: past it, the rest keeps the modes it had. */
const MAX_ENTRIES = 500_000;
const MAX_DEPTH = 64;

/**
 * Lets the shell user write in the workspace, the first time commands run there as that user: the workspace and
 * every folder and file in it join that user's group, with group write, and folders get the set-group-ID bit so
 * that what is made in them later joins too. Their owner stays who it was. Giving them to the user itself would
 * take a checkout's files away from the person who cloned it (who could no longer edit them without root) and make
 * every `ls -l` name parlor-shell as the owner; a group only adds a reader and writer, and `chgrp -R` undoes it.
 * Root reads and writes all of it as before. Symlinks are left alone (never followed), and so are files with more
 * than one name, which may be a name for a file outside.
 *
 * Later runs look only at the folders directly in the workspace: one Parlor or the owner made since (`uploads`) is
 * given too, so commands can clear out what was downloaded. Returns how many entries changed.
 */
export async function shareWorkspace(workspace: string, user: ShellUser): Promise<number> {
  const top = await fs.open(workspace, OPEN_FOLDER);
  try {
    const stat = await top.stat();
    const budget = { entries: MAX_ENTRIES };
    if (!isShared(stat, user)) {
      // Contents first, the workspace last: a walk cut short (a restart) is taken up again next time.
      const changed = await shareContents(top, user, 0, budget);
      return changed + (await share(top, stat, user));
    }
    let changed = 0;
    for (const entry of await fs.readdir(`${PROC_FD}/${top.fd}`, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const folder = await openEntry(top, entry.name, OPEN_FOLDER);
      if (!folder) continue;
      try {
        const folderStat = await folder.stat();
        // One the shell user made is its own to open or close.
        if (folderStat.uid === user.uid || isShared(folderStat, user)) continue;
        changed += (await shareContents(folder, user, 1, budget)) + (await share(folder, folderStat, user));
      } finally {
        await folder.close();
      }
    }
    return changed;
  } finally {
    await top.close();
  }
}

function isShared(stat: { gid: number; mode: number }, user: ShellUser): boolean {
  return stat.gid === user.gid && (stat.mode & (SETGID | GROUP_ALL)) === (SETGID | GROUP_ALL);
}

async function shareContents(folder: FileHandle, user: ShellUser, depth: number, budget: { entries: number }): Promise<number> {
  if (depth >= MAX_DEPTH) return 0;
  let changed = 0;
  for (const entry of await fs.readdir(`${PROC_FD}/${folder.fd}`, { withFileTypes: true }).catch(() => [])) {
    if (!entry.isDirectory() && !entry.isFile()) continue;
    if (--budget.entries < 0) return changed;
    const handle = await openEntry(folder, entry.name, entry.isDirectory() ? OPEN_FOLDER : OPEN_FILE);
    if (!handle) continue;
    try {
      const stat = await handle.stat();
      if (stat.isDirectory()) changed += (await shareContents(handle, user, depth + 1, budget)) + (await share(handle, stat, user));
      else if (stat.isFile() && stat.nlink === 1) changed += await share(handle, stat, user);
    } finally {
      await handle.close();
    }
  }
  return changed;
}

async function openEntry(folder: FileHandle, name: string, flags: number): Promise<FileHandle | undefined> {
  // Swapped for a symlink (ELOOP), gone, or something that will not open: left as it is.
  return fs.open(`${PROC_FD}/${folder.fd}/${name}`, flags).catch(() => undefined);
}

/** The group, and group permissions like the owner's plus write (and set-group-ID on a folder). */
async function share(handle: FileHandle, stat: { uid: number; gid: number; mode: number; isDirectory(): boolean }, user: ShellUser): Promise<number> {
  const mode = stat.mode & 0o7777;
  // A file keeps no set-user-ID or set-group-ID bit: the group could run it as its owner.
  const wanted = stat.isDirectory() ? mode | SETGID | GROUP_ALL : (mode & ~0o6000) | 0o060 | ((mode & 0o100) >> 3);
  if (stat.gid === user.gid && mode === wanted) return 0;
  // The group first: a set-group-ID bit set before a chown would be cleared by it.
  if (stat.gid !== user.gid) await handle.chown(stat.uid, user.gid);
  await handle.chmod(wanted);
  return 1;
}

export interface LockedFiles {
  /** Files whose mode was tightened just now. */
  tightened: string[];
  /** Files the shell user can still read, and why they could not be closed to it: nothing may run then. */
  open: string[];
}

/**
 * Makes Parlor's files unreadable to the shell user, before each command: every `.env` file (a hidden one, one
 * directly in a hidden folder, or one in a folder directly in it: each persona's in the personas folder, but not
 * one in a workspace, which the shell user may write) loses
 * all group and other permissions (mode 600 when it was 644), and the other files directly in a hidden folder
 * (postgres.json and the server's log in Parlor's home; SOUL.md and the settings files in a persona's folder) lose
 * the permissions of other users. Folders keep theirs: the shell user passes through them to its workspace, and
 * the Postgres server's user to its data. Tightened rather than refused: Parlor, root, is the only reader that
 * needs them, and the file's owner keeps every permission it had.
 */
export async function lockHiddenFiles(hide: readonly string[], user: ShellUser): Promise<LockedFiles> {
  const result: LockedFiles = { tightened: [], open: [] };
  const seen = new Set<string>();
  const lock = async (file: string, closed: number) => {
    if (seen.has(file)) return;
    seen.add(file);
    await lockFile(file, closed, user, result);
  };
  for (const given of hide) {
    const real = await fs.realpath(given).catch(() => undefined);
    const stat = real && (await fs.stat(real).catch(() => undefined));
    if (!real || !stat) continue;
    if (!stat.isDirectory()) {
      await lock(real, 0o077);
      continue;
    }
    for (const entry of await fs.readdir(real, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(real, entry.name);
      if (entry.isFile()) await lock(full, isEnvFile(entry.name) ? 0o077 : 0o007);
      // A `.env` may be a link to the file kept elsewhere; other links may lead anywhere (/etc) and are left alone.
      else if (entry.isSymbolicLink() && isEnvFile(entry.name)) {
        const target = await fs.realpath(full).catch(() => undefined);
        if (target) await lock(target, 0o077);
      } else if (entry.isDirectory() || entry.isSymbolicLink()) {
        // A folder given to the shell user (a workspace) holds nothing of Parlor's: a `.env` there is its own.
        const folder = await fs.stat(full).catch(() => undefined);
        if (!folder?.isDirectory() || folder.uid === user.uid || folder.gid === user.gid) continue;
        const env = await fs.realpath(path.join(full, '.env')).catch(() => undefined);
        if (env) await lock(env, 0o077);
      }
    }
  }
  return result;
}

function isEnvFile(name: string): boolean {
  return name === '.env' || name.startsWith('.env.');
}

async function lockFile(file: string, closed: number, user: ShellUser, result: LockedFiles): Promise<void> {
  const handle = await fs.open(file, OPEN_FILE).catch(() => undefined);
  if (!handle) return;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return;
    // Its own file it can read whatever the mode says, and change the mode back.
    if (stat.uid === user.uid) {
      result.open.push(`${file} belongs to the ${user.name} user (chown it to root)`);
      return;
    }
    const mode = stat.mode & 0o7777;
    // Group permissions matter only for a file of the shell user's group, unless asked to go.
    const wanted = mode & ~(stat.gid === user.gid ? 0o077 : closed);
    if (wanted === mode) return;
    try {
      await handle.chmod(wanted);
      result.tightened.push(file);
    } catch (err) {
      if (readableBy(mode, stat.gid, user)) result.open.push(`${file} is readable by other users and its mode could not be changed (${(err as Error).message})`);
    }
  } finally {
    await handle.close();
  }
}

function readableBy(mode: number, gid: number, user: ShellUser): boolean {
  return Boolean(mode & 0o004) || (gid === user.gid && Boolean(mode & 0o040));
}
