import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Persona } from '#src/config/persona.ts';
import { findShellUser, folderOutOfReach, SHELL_USER, type ShellUser, type ShellUserOptions } from './shell-user.ts';
import { isInside } from './workspace.ts';

/**
 * The sandbox commands run in (shell_exec today; custom and background tools later): bubblewrap with a whitelist of
 * read-only system folders, the persona's workspace as the only writable folder, a fresh /proc in its own PID
 * namespace (Parlor's processes and their environment are not there), a minimal /dev and a private /tmp. Parlor's
 * home, the personas folder and its `.env` files are not in the whitelist; when they sit under a whitelisted
 * folder anyway (a checkout in /opt), they are hidden by their real paths, and so are the folders that symlinks in
 * a hidden folder lead to (a persona folder linked in from /opt). The network is kept: `curl` is a legitimate command.
 *
 * Without bubblewrap, a Parlor running as root runs commands as an unprivileged user of their own instead (see
 * shell-user.ts); without either, the shell is off unless the persona's owner chose to run it unsandboxed.
 */

export interface SandboxStatus {
  /** Whether bubblewrap works here. */
  available: boolean;
  /** The bubblewrap that works, or why none does and what to do (and then which user commands run as). */
  detail: string;
  /** Without bubblewrap, with Parlor running as root: the unprivileged user commands run as instead. */
  separateUser?: ShellUser;
}

/**
 * What the persona's `shell_exec` does: run in the sandbox, run as a user of its own, run directly (its owner's
 * choice), or not exist.
 */
export interface ShellAccess {
  mode: 'sandboxed' | 'separate-uid' | 'unsandboxed' | 'off';
  /** For `parlor doctor` and start-up; absent when there is nothing to say. */
  warning?: string;
}

export interface SandboxPaths {
  /** The persona's workspace (a real path): bound read-write at the same path. */
  workspace: string;
  /** The folder to start in, inside the workspace. */
  cwd: string;
  /**
   * Paths to hide even when a whitelisted folder holds them: Parlor's home, the personas folder, its `.env`, each
   * persona's folder. Hidden at their real paths; for a folder, the places its symlinks lead to are hidden too.
   */
  hide?: readonly string[];
}

interface Profile {
  name: string;
  flags: readonly string[];
  sizedTmp: boolean;
}

// Tried in order; the first that runs is used. Without a user namespace of its own a sandbox started by root keeps
// every capability unless told otherwise, hence `--cap-drop ALL` in both.
const PROFILES: readonly Profile[] = [
  { name: 'user namespace, no capabilities', flags: ['--unshare-user', '--disable-userns', '--cap-drop', 'ALL'], sizedTmp: true },
  { name: 'no capabilities', flags: ['--cap-drop', 'ALL'], sizedTmp: false },
];
const SYSTEM_FOLDERS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt'];
const TMP_BYTES = 256 * 1024 * 1024;
const TRIAL_TIMEOUT_MS = 10_000;

interface Detected {
  status: SandboxStatus;
  bwrap?: string;
  profile?: Profile;
}

// Whether bubblewrap works is a fact about the machine, found once per process by a trial run and kept.
let detected: Detected | undefined;

/**
 * How commands are kept from Parlor's secrets on this machine: bubblewrap, else a user of their own (found by a
 * trial run and a look for that user the first time, then remembered).
 */
export function shellSandboxStatus(): SandboxStatus {
  detected ??= detect();
  return detected.status;
}

export interface DetectOptions {
  /** The folders bubblewrap is looked for in (default $PATH). */
  path?: string;
  /** Whether Parlor runs as root, and so can run commands as another user (default: whether it does). */
  root?: boolean;
  /** The user commands run as without bubblewrap. */
  user?: ShellUserOptions;
}

/** Finds out afresh, not remembered: shellSandboxStatus() does this once for the real machine. */
export function detectShellIsolation(options: DetectOptions = {}): SandboxStatus {
  return detect(options).status;
}

/**
 * The policy: the sandbox when there is one; else a user of its own when Parlor is root; else run directly only if
 * the persona opted in, else no shell. An opt-in never weakens what the machine has: it only lets a persona run
 * commands where there is nothing else.
 */
export function shellAccess(persona: Pick<Persona, 'name' | 'tools' | 'workspace'>, status: SandboxStatus = shellSandboxStatus()): ShellAccess {
  const mode = shellMode(persona, status);
  if (mode === 'sandboxed' || (mode === 'off' && persona.tools.deny.includes('shell_exec'))) return { mode };
  if (mode === 'separate-uid') return separateUserAccess(persona, status.separateUser!);
  if (mode === 'unsandboxed') {
    return {
      mode: 'unsandboxed',
      warning: `shell_exec runs unsandboxed for persona ${persona.name} ("shell": "unsandboxed" in its tools.jsonc): ${status.detail}; its commands can read Parlor's secrets`,
    };
  }
  return { mode: 'off', warning: `shell_exec is off for persona ${persona.name}: ${status.detail}, or set "shell": "unsandboxed" in its tools.jsonc` };
}

/**
 * How the persona's commands run, as shellAccess decides it, without looking at the disk for what to warn about:
 * asked on every turn (is the tool offered at all), where the warning is not wanted.
 */
export function shellMode(persona: Pick<Persona, 'tools'>, status: SandboxStatus = shellSandboxStatus()): ShellAccess['mode'] {
  if (status.available) return 'sandboxed';
  if (persona.tools.deny.includes('shell_exec')) return 'off';
  if (status.separateUser) return 'separate-uid';
  return persona.tools.shell === 'unsandboxed' ? 'unsandboxed' : 'off';
}

/** Only what is worth fixing is said: the user is one other programs share, or it cannot reach the workspace. */
function separateUserAccess(persona: Pick<Persona, 'name' | 'workspace'>, user: ShellUser): ShellAccess {
  const blocked = folderOutOfReach(persona.workspace, user);
  if (!user.fallback && !blocked) return { mode: 'separate-uid' };
  let warning = `shell_exec for persona ${persona.name} runs as the ${user.name} user`;
  if (user.fallback) warning += `, which other programs may share, because ${user.fallback} (useradd --system --user-group ${SHELL_USER} makes it)`;
  if (blocked) {
    warning +=
      `${user.fallback ? '; it' : ', who'} cannot enter ${blocked}: commands start in the workspace but cannot reach it by its full path ` +
      'or through $HOME (keep the personas folder where other users can pass through)';
  }
  return { mode: 'separate-uid', warning };
}

/** The descriptor a command run by sandboxedCommand's arguments writes one byte to as it starts. */
export const SANDBOX_STARTED_FD = 3;

/**
 * The program and arguments that run `argv` in the sandbox, or undefined when there is no sandbox; `readOnly`
 * folders are bound after the sandbox's own (over a hidden folder a tool's folder may sit in). A shell starts the
 * command, and first writes one byte to descriptor SANDBOX_STARTED_FD (which the command does not get): a run that
 * never wrote it never ran the command, because bubblewrap could not set the sandbox up. That happens when a path
 * it was to mask went away after the arguments were made (a root-only file under /etc or /opt removed), and fresh
 * arguments run. (bubblewrap's own report of it, --json-status-fd, comes only when the run ends.)
 */
export function sandboxedCommand(
  argv: readonly string[],
  paths: SandboxPaths & { readOnly?: readonly string[] },
): { file: string; args: string[] } | undefined {
  detected ??= detect();
  if (!detected.bwrap || !detected.profile) return undefined;
  const binds = (paths.readOnly ?? []).flatMap((folder) => ['--ro-bind', folder, folder]);
  // Without its byte said, the command does not run (a run that is not known to have started may be run again).
  const started = ['/bin/sh', '-c', `printf . >&${SANDBOX_STARTED_FD} || exit 126; exec "$@" ${SANDBOX_STARTED_FD}>&-`, 'sh'];
  return { file: detected.bwrap, args: [...sandboxArgs(detected.profile, paths), ...binds, ...started, ...argv] };
}

function detect(options: DetectOptions = {}): Detected {
  const bubblewrap = detectBubblewrap(options.path);
  if (bubblewrap.status.available || process.platform !== 'linux' || !(options.root ?? process.getuid?.() === 0)) return bubblewrap;
  const user = findShellUser(options.user);
  const detail = bubblewrap.status.detail;
  if (!user) return { status: { available: false, detail: `${detail}; nor is there a ${SHELL_USER} or nobody user to run commands as` } };
  const note = user.fallback ? ` (${user.fallback})` : '';
  return { status: { available: false, detail: `${detail}; commands run as the ${user.name} user${note}`, separateUser: user } };
}

function detectBubblewrap(searchPath: string | undefined): Detected {
  if (process.platform !== 'linux') return { status: { available: false, detail: 'bubblewrap, the sandbox, needs Linux' } };
  const bwrap = findProgram('bwrap', searchPath);
  if (!bwrap) return { status: { available: false, detail: 'bubblewrap is not installed (apt install bubblewrap)' } };
  const version = spawnSync(bwrap, ['--version'], { encoding: 'utf8', env: {}, timeout: TRIAL_TIMEOUT_MS }).stdout?.trim() || 'bubblewrap';
  const workspace = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-sandbox-check-')));
  try {
    let failure = '';
    for (const profile of PROFILES) {
      const trial = spawnSync(bwrap, [...sandboxArgs(profile, { workspace, cwd: workspace }), '/bin/sh', '-c', 'echo ok > check && cat check'], {
        encoding: 'utf8',
        env: { PATH: '/usr/bin:/bin' },
        timeout: TRIAL_TIMEOUT_MS,
      });
      if (trial.status === 0 && trial.stdout.trim() === 'ok') return { status: { available: true, detail: `${version} (${profile.name})` }, bwrap, profile };
      failure = (trial.stderr || trial.error?.message || `exit ${trial.status}`).trim().split('\n')[0]!;
    }
    return { status: { available: false, detail: `${version} is installed but cannot start a sandbox here (${failure})` } };
  } finally {
    fs.rmSync(workspace, { recursive: true, force: true });
  }
}

function sandboxArgs(profile: Profile, paths: SandboxPaths): string[] {
  const args = [...profile.flags, '--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try'];
  const bound: string[] = [];
  for (const folder of SYSTEM_FOLDERS) {
    const stat = lstat(folder);
    if (stat?.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(folder), folder);
    else if (stat?.isDirectory()) {
      args.push('--ro-bind', folder, folder);
      bound.push(folder);
    }
  }
  // DNS: /etc/resolv.conf often points into /run (systemd-resolved, NetworkManager), which is not bound.
  const resolver = realpath('/etc/resolv.conf');
  if (resolver && !bound.some((folder) => isInside(folder, resolver))) args.push('--ro-bind', resolver, resolver);
  // Sysctls are writable by uid 0 even without capabilities; bubblewrap covers /proc/sys itself on most kernels.
  args.push('--proc', '/proc', '--ro-bind', '/proc/sys', '/proc/sys', '--dev', '/dev');
  if (profile.sizedTmp) args.push('--size', String(TMP_BYTES));
  args.push('--tmpfs', '/tmp');
  // What another user could not read (shadow, SSH host keys, TLS private keys, an app's secrets in /opt) the
  // sandbox, being uid 0 when Parlor runs as root, could: mask it.
  for (const folder of MASK_SCANNED.filter((f) => bound.includes(f))) for (const unreadable of unreadableUnder(folder)) args.push(...mask(unreadable));
  const hidden = [...hiddenPaths(paths.hide ?? [])].filter(
    (real) => real !== paths.workspace && (bound.some((folder) => isInside(folder, real)) || isInside(paths.workspace, real)),
  );
  for (const real of hidden.filter((p) => !isInside(paths.workspace, p))) args.push(...mask(real));
  args.push('--bind', paths.workspace, paths.workspace);
  for (const real of hidden.filter((p) => isInside(paths.workspace, p))) args.push(...mask(real));
  args.push('--chdir', paths.cwd);
  return args;
}

/**
 * An empty folder in place of a folder; /dev/null in place of a file (which cannot be opened there: the mounts are
 * nodev); nothing for what is gone since a scan (bubblewrap cannot make a mount point in a read-only folder).
 */
function mask(target: string): string[] {
  const stat = lstat(target);
  if (!stat) return [];
  return stat.isDirectory() ? ['--tmpfs', target] : ['--ro-bind', '/dev/null', target];
}

/**
 * The real path of every entry, and of every symlink directly inside a hidden folder: a persona folder linked into
 * the personas folder from /opt would otherwise stay in view at the place it leads to, `.env` and all.
 */
function hiddenPaths(given: readonly string[]): Set<string> {
  const found = new Set<string>();
  for (const entry of given) {
    const real = realpath(entry);
    if (!real) continue;
    found.add(real);
    if (!lstat(real)?.isDirectory()) continue;
    for (const child of readFolder(real)) {
      if (!child.isSymbolicLink()) continue;
      const target = realpath(path.join(real, child.name));
      // A link to a whole system folder (or above one) is no persona; masking it would leave commands no /usr.
      if (target && !SYSTEM_FOLDERS.some((folder) => isInside(target, folder))) found.add(target);
    }
  }
  return found;
}

/**
 * Folders scanned for what other users may not read. /usr is not: it is large (a scan would cost seconds), and
 * what packages install there is meant to be read. A scan is kept for a while (commands come in bursts; /etc and a
 * modest /opt take tens of milliseconds) and stops after a number of entries: past that, a huge /opt is shown as
 * it is, so keep secrets there out of reach of other users, or outside the sandbox's folders.
 */
const MASK_SCANNED = ['/etc', '/opt'];
const MASK_SCAN_TTL_MS = 30_000;
const MASK_SCAN_ENTRIES = 20_000;
const scans = new Map<string, { at: number; changed: number; found: string[] }>();

/** A kept scan is also dropped once the folder itself changed (something installed or removed right under it). */
function unreadableUnder(root: string): string[] {
  const changed = lstat(root)?.mtimeMs ?? 0;
  const cached = scans.get(root);
  if (cached && cached.changed === changed && Date.now() - cached.at < MASK_SCAN_TTL_MS) return cached.found;
  const found = unreadableBy(others, root, 0, { entries: MASK_SCAN_ENTRIES });
  scans.set(root, { at: Date.now(), changed, found });
  return found;
}

const others = { read: 0o004, enter: 0o001 };

/** Files under `root` that other users cannot read, and folders they cannot list or enter. */
function unreadableBy(bits: typeof others, root: string, depth: number, budget: { entries: number }): string[] {
  const found: string[] = [];
  for (const entry of readFolder(root)) {
    if (!entry.isFile() && !entry.isDirectory()) continue;
    if (--budget.entries < 0) break;
    const full = path.join(root, entry.name);
    const mode = lstat(full)?.mode ?? 0;
    if (entry.isFile() && !(mode & bits.read)) found.push(full);
    else if (entry.isDirectory() && !((mode & bits.read) && (mode & bits.enter))) found.push(full);
    else if (entry.isDirectory() && depth < 8) found.push(...unreadableBy(bits, full, depth + 1, budget));
  }
  return found;
}

function readFolder(folder: string): fs.Dirent[] {
  try {
    return fs.readdirSync(folder, { withFileTypes: true });
  } catch {
    return [];
  }
}

function findProgram(name: string, searchPath = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'): string | undefined {
  for (const folder of searchPath.split(path.delimiter)) {
    const candidate = path.join(folder, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function lstat(target: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(target);
  } catch {
    return undefined;
  }
}

function realpath(target: string): string | undefined {
  try {
    return fs.realpathSync(target);
  } catch {
    return undefined;
  }
}
