import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The middle tier of the shell's isolation: without bubblewrap, but with Parlor running as root, commands run as an
 * unprivileged user of their own. Being another uid is what keeps Parlor's secrets from them: a root process's
 * /proc/<pid>/environ is not readable by another uid, nor are the files Parlor keeps at mode 600 (postgres.json,
 * the `.env` files once shell-user-files.ts has tightened them). Everything any user may read stays readable.
 */

export interface ShellUser {
  name: string;
  uid: number;
  gid: number;
  /** Why this is not a user of Parlor's own (`nobody`, which other programs may share); absent when it is. */
  fallback?: string;
}

export const SHELL_USER = 'parlor-shell';
const FALLBACK_USER = 'nobody';
const USERADD = ['/usr/sbin/useradd', '/sbin/useradd'];
const NOLOGIN = ['/usr/sbin/nologin', '/sbin/nologin'];
const TIMEOUT_MS = 10_000;

export interface ShellUserOptions {
  /** The user to find or make (default parlor-shell). */
  name?: string;
  /** The useradd programs to try, in order (default /usr/sbin/useradd, /sbin/useradd). */
  useradd?: readonly string[];
}

/**
 * The user commands run as: `parlor-shell`, made when missing the way the embedded Postgres makes `postgres` (a
 * system user with a group of its own, no login shell and no home), else `nobody`. Undefined when neither exists.
 * A user that is root in disguise (uid or gid 0) is never used.
 */
export function findShellUser(options: ShellUserOptions = {}): ShellUser | undefined {
  const name = options.name ?? SHELL_USER;
  let failure = '';
  let user = lookUpUser(name);
  if (!user) {
    const made = makeSystemUser(name, options.useradd ?? USERADD);
    // Another Parlor (or a test worker) may have made it meanwhile, failing ours: looked up again either way.
    user = lookUpUser(name);
    if (!user) failure = made;
  }
  if (user && user.uid !== 0 && user.gid !== 0) return user;
  if (user) failure = `${name} has uid or gid 0`;
  const nobody = lookUpUser(FALLBACK_USER);
  if (!nobody || nobody.uid === 0 || nobody.gid === 0) return undefined;
  return { ...nobody, fallback: user ? failure : `${name} could not be made: ${failure}` };
}

/** Reads /etc/passwd: system users live there, and so does what useradd makes. */
function lookUpUser(name: string): ShellUser | undefined {
  let text: string;
  try {
    text = fs.readFileSync('/etc/passwd', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [login, , uid, gid] = line.split(':');
    if (login === name && /^\d+$/.test(uid ?? '') && /^\d+$/.test(gid ?? '')) return { name, uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

function groupExists(name: string): boolean {
  try {
    return fs.readFileSync('/etc/group', 'utf8').split('\n').some((line) => line.split(':')[0] === name);
  } catch {
    return false;
  }
}

/** Runs useradd; what went wrong, or '' when it ran. */
function makeSystemUser(name: string, candidates: readonly string[]): string {
  const useradd = candidates.find(isExecutable);
  if (!useradd) return 'no useradd here';
  const shell = NOLOGIN.find(isExecutable) ?? '/bin/false';
  // A group of the same name left by an earlier attempt is joined; otherwise useradd makes it.
  const group = groupExists(name) ? ['--gid', name] : ['--user-group'];
  const made = spawnSync(useradd, ['--system', ...group, '--no-create-home', '--home-dir', '/nonexistent', '--shell', shell, name], {
    encoding: 'utf8',
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    timeout: TIMEOUT_MS,
  });
  if (made.status === 0) return '';
  return (made.stderr || made.error?.message || `useradd exited with ${made.status}`).trim().split('\n')[0]!;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The first folder above `folder` that `user` cannot enter, or undefined when it can reach `folder` by its path.
 * Commands start in the workspace all the same (Parlor enters it before giving up root), but cannot name it by
 * its full path, and `$HOME` is that path.
 */
export function folderOutOfReach(folder: string, user: ShellUser): string | undefined {
  let existing = path.resolve(folder);
  for (;;) {
    try {
      existing = fs.realpathSync(existing);
      break;
    } catch {
      if (existing === path.dirname(existing)) return undefined;
      existing = path.dirname(existing);
    }
  }
  const above: string[] = [];
  for (let dir = path.dirname(existing); ; dir = path.dirname(dir)) {
    above.unshift(dir);
    if (dir === path.dirname(dir)) break;
  }
  if (existing !== path.resolve(folder)) above.push(existing);
  for (const dir of above) {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(dir);
    } catch {
      return undefined;
    }
    const bit = stat.uid === user.uid ? 0o100 : stat.gid === user.gid ? 0o010 : 0o001;
    if (!(stat.mode & bit)) return dir;
  }
  return undefined;
}
