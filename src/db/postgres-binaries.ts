import { createHash, randomBytes } from 'node:crypto';
import { constants, createReadStream, existsSync, type Stats } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedPostgresError } from '#src/db/embedded-postgres-error.ts';
import { isAlive, runAs, type OsUser } from '#src/db/postgres-process.ts';

/** Where Parlor keeps what the `postgres` OS user must reach when Parlor's own folders are out of its reach. */
export const DEFAULT_SYSTEM_DIR = '/var/lib/parlor';

/** A relocatable Postgres build: the programs in `bin/` find `lib/` and `share/` beside it. */
export interface PostgresBinaries {
  dir: string;
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

/** The build shipped in the `@embedded-postgres/<platform>-<arch>` package. */
export async function packagedBinariesDir(): Promise<string> {
  const pkg = `@embedded-postgres/${os.platform() === 'win32' ? 'windows' : os.platform()}-${os.arch()}`;
  try {
    const { initdb } = (await import(pkg)) as { initdb: string };
    return path.dirname(path.dirname(initdb));
  } catch (err) {
    throw new EmbeddedPostgresError(
      `no embedded Postgres binaries for ${os.platform()}-${os.arch()} (${pkg}); set DATABASE_URL to a Postgres server instead`,
      { cause: err },
    );
  }
}

/**
 * The binaries in `dir`, or — when `user` cannot run them there (root's checkout under /root, any mode-700
 * folder on the way) — a copy under `systemDir` that it can, made once per build and shared by every checkout.
 */
export async function reachableBinaries(
  dir: string,
  user: OsUser | undefined,
  systemDir: string,
  log: (msg: string) => void,
): Promise<PostgresBinaries> {
  if (!user || (await canRun(dir, user))) return binariesIn(dir);
  const copy = await installedCopy(dir, systemDir, log);
  if (!(await canRun(copy, user))) {
    throw new EmbeddedPostgresError(
      `the postgres OS user can run neither the Postgres binaries in ${dir} nor their copy in ${copy} ` +
        `(is ${systemDir} mounted noexec, or closed to other users?); clone Parlor into a folder every user can enter, such as /opt/parlor, or set DATABASE_URL`,
    );
  }
  return binariesIn(copy);
}

function binariesIn(dir: string): PostgresBinaries {
  return {
    dir,
    initdb: path.join(dir, 'bin', 'initdb'),
    pg_ctl: path.join(dir, 'bin', 'pg_ctl'),
    postgres: path.join(dir, 'bin', 'postgres'),
  };
}

/** Whether `user` can start the programs in `dir`, load their libraries and read the files initdb needs. */
async function canRun(dir: string, user: OsUser): Promise<boolean> {
  const check = '"$0/bin/postgres" -V && test -x "$0/bin/initdb" && test -x "$0/bin/pg_ctl" && test -r "$0/share/postgresql/postgres.bki"';
  return (await runAs('/bin/sh', ['-c', check, dir], user)).code === 0;
}

/**
 * `<systemDir>/postgres-<version>-<digest>`, copied there unless an earlier start did. The copy is written to a
 * temporary folder and renamed into place, so a reader never sees half a copy, and of two processes copying at once
 * one rename wins and the other uses its result.
 */
async function installedCopy(dir: string, systemDir: string, log: (msg: string) => void): Promise<string> {
  const name = `postgres-${await buildId(dir)}`;
  const target = path.join(systemDir, name);
  if (isComplete(target)) return target;
  const temp = path.join(systemDir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await makeTraversableDir(systemDir);
    await removeAbandonedCopies(systemDir);
    log(`the postgres OS user cannot run the Postgres binaries in ${dir}; copying them to ${target}`);
    const started = Date.now();
    await fs.mkdir(temp);
    await fs.chmod(temp, 0o755);
    for (const part of ['bin', 'lib', 'share']) await copyTree(path.join(dir, part), path.join(temp, part), dir);
    await fs.rename(temp, target);
    log(`copied the Postgres binaries to ${target} in ${Date.now() - started} ms`);
    return target;
  } catch (err) {
    await fs.rm(temp, { recursive: true, force: true }).catch(() => {});
    if (isComplete(target)) return target;
    throw new EmbeddedPostgresError(
      `the postgres OS user cannot run the Postgres binaries in ${dir}, and copying them to ${target} failed ` +
        `(${(err as Error).message}); clone Parlor into a folder every user can enter, such as /opt/parlor, or set DATABASE_URL`,
      { cause: err },
    );
  }
}

function isComplete(copy: string): boolean {
  return existsSync(path.join(copy, 'bin', 'postgres'));
}

/** The package's version (for people reading the folder name) and a digest of the server (for everything else). */
async function buildId(dir: string): Promise<string> {
  const pkg = await fs.readFile(path.join(dir, '..', 'package.json'), 'utf8').then(
    (text) => String((JSON.parse(text) as { version?: unknown }).version ?? 'unversioned'),
    () => 'unversioned',
  );
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path.join(dir, 'bin', 'postgres'))) hash.update(chunk as Buffer);
  return `${pkg.replace(/[^\w.-]/g, '_')}-${hash.digest('hex').slice(0, 12)}`;
}

/** Temporary folders of copies whose process died before renaming them. */
async function removeAbandonedCopies(systemDir: string): Promise<void> {
  for (const entry of await fs.readdir(systemDir)) {
    const pid = /^\.postgres-.+\.(\d+)\.[0-9a-f]+\.tmp$/.exec(entry)?.[1];
    if (pid && !isAlive(Number(pid))) await fs.rm(path.join(systemDir, entry), { recursive: true, force: true });
  }
}

/**
 * Copies a folder with modes that let every user read it and run its programs. Relative links inside the tree
 * (lib/libpq.so → libpq.so.5.18) stay links; any other link is replaced by what it points to, which may itself be
 * in the folder the copy is for.
 */
async function copyTree(from: string, to: string, root: string): Promise<void> {
  await fs.mkdir(to);
  await fs.chmod(to, 0o755);
  const entries = await fs.readdir(from, { withFileTypes: true });
  await Promise.all(
    entries.map(async (entry) => {
      const source = path.join(from, entry.name);
      const target = path.join(to, entry.name);
      if (entry.isSymbolicLink()) {
        const link = await fs.readlink(source);
        const resolved = path.resolve(from, link);
        if (!path.isAbsolute(link) && resolved.startsWith(root + path.sep)) return fs.symlink(link, target);
        return copyEntry(await fs.stat(source), source, target, root);
      }
      return copyEntry(await fs.stat(source), source, target, root);
    }),
  );
}

async function copyEntry(stat: Stats, source: string, target: string, root: string): Promise<void> {
  if (stat.isDirectory()) return copyTree(source, target, root);
  if (!stat.isFile()) return;
  await fs.copyFile(source, target, constants.COPYFILE_FICLONE);
  const executable = (stat.mode & 0o100) !== 0;
  await fs.chmod(target, executable ? 0o755 : 0o644);
}

/**
 * Creates `dir` and its missing parents so that other users may pass through them (0711, whatever the umask), and
 * makes an existing `dir` passable too.
 */
export async function makeTraversableDir(dir: string): Promise<void> {
  const first = await fs.mkdir(dir, { recursive: true });
  if (first) {
    for (let d = dir; d.startsWith(first); d = path.dirname(d)) await fs.chmod(d, 0o711);
    return;
  }
  const mode = (await fs.stat(dir)).mode & 0o777;
  if ((mode & 0o001) === 0) await fs.chmod(dir, mode | 0o011);
}
