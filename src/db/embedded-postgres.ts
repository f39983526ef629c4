import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import postgres from 'postgres';
import { EmbeddedPostgresError } from '#src/db/embedded-postgres-error.ts';
import { DEFAULT_SYSTEM_DIR, makeTraversableDir, packagedBinariesDir, reachableBinaries } from '#src/db/postgres-binaries.ts';
import { isAlive, runAs as run, serverUser, type OsUser } from '#src/db/postgres-process.ts';

export { EmbeddedPostgresError };

/**
 * A Postgres cluster under PARLOR_HOME, run with the binaries of the `embedded-postgres` packages through pg_ctl
 * (as root: as the `postgres` OS user, from a copy of the binaries it can reach when it cannot reach ours).
 * The server is a daemon of its own: a second Parlor process on the same home (say `parlor chat` beside
 * `parlor start`) finds it running and shares it, and the last process to leave stops it.
 */
export interface EmbeddedPostgres {
  /** Over TCP on 127.0.0.1. */
  url: string;
  /**
   * What a Parlor process connects with: the server's Unix socket in its data directory (libpq's `?host=`), which
   * costs both sides less per statement than TCP; `url` where the server has no socket (a data directory whose path
   * is too long for one, or a server started without it).
   */
  localUrl: string;
  dataDir: string;
  /** Stops the server unless another Parlor process is still connected to it. */
  release(): Promise<void>;
  /**
   * Stops and starts the server, whoever is connected (`immediate`: without a checkpoint, as after a crash; `fast`:
   * connections are closed first). Clients lose their connections and must reconnect.
   */
  restart(mode: 'immediate' | 'fast'): Promise<void>;
}

interface Settings {
  port: number;
  password: string;
}

export interface EmbeddedPostgresOptions {
  /** A Postgres build with bin/, lib/ and share/ (default: the `@embedded-postgres/<platform>-<arch>` package). */
  binaries?: string;
  /**
   * Where, when we are root, what the `postgres` OS user cannot reach in Parlor's folders goes instead: the data
   * directory and a copy of the binaries (default /var/lib/parlor).
   */
  systemDir?: string;
}

/**
 * `<home>/postgres`, unless we are root and the `postgres` user cannot reach it (a home under /root, say): then a
 * folder under the system folder named after the home, so the data still survives restarts.
 */
async function chooseDataDir(root: string, user: OsUser | undefined, systemDir: string): Promise<string> {
  const preferred = path.join(root, 'postgres');
  if (!user) return preferred;
  // Our own home only needs to be traversable (not readable) by the server's user.
  const mode = (await fs.stat(root)).mode & 0o777;
  if ((mode & 0o001) === 0) await fs.chmod(root, mode | 0o001);
  if ((await run('/bin/sh', ['-c', 'test -x "$0"', root], user)).code === 0) return preferred;
  const fallback = path.join(systemDir, createHash('sha256').update(root).digest('hex').slice(0, 12));
  await makeTraversableDir(fallback);
  return path.join(fallback, 'postgres');
}

/**
 * Where the server's Unix socket goes: its data directory, which only its own user (and root) may enter. None when
 * the socket's path would be too long for one (103 bytes on macOS, 107 on Linux: the server would not start), or the
 * directory's name has characters the server's option cannot carry.
 */
function socketDirFor(dataDir: string, port: number): string | undefined {
  return /^[\w/.@+-]+$/.test(dataDir) && Buffer.byteLength(socketPath(dataDir, port)) <= 103 ? dataDir : undefined;
}

const socketPath = (dir: string, port: number) => path.join(dir, `.s.PGSQL.${port}`);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Serializes start-up between processes sharing one home: an exclusive lock file, stale after its owner dies. */
async function withStartLock<T>(home: string, fn: () => Promise<T>): Promise<T> {
  const lockPath = path.join(home, 'postgres.lock');
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const handle = await fs.open(lockPath, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number((await fs.readFile(lockPath, 'utf8').catch(() => '')).trim());
      if (!owner || !isAlive(owner)) {
        await fs.rm(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new EmbeddedPostgresError(`timed out waiting for ${lockPath} (held by pid ${owner})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    await fs.rm(lockPath, { force: true });
  }
}

async function readSettings(file: string): Promise<Settings | undefined> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as Settings;
  } catch {
    return undefined;
  }
}

/** The port of the server running on `dataDir`, from its postmaster.pid, if that server is alive. */
async function runningPort(dataDir: string): Promise<number | undefined> {
  const pidFile = await fs.readFile(path.join(dataDir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  if (!pidFile) return undefined;
  const lines = pidFile.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  return pid && isAlive(pid) && port ? port : undefined;
}

export async function startEmbeddedPostgres(
  home: string,
  log: (msg: string) => void = () => {},
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const root = path.resolve(home);
  const systemDir = options.systemDir ?? DEFAULT_SYSTEM_DIR;
  await fs.mkdir(root, { recursive: true });
  const settingsFile = path.join(root, 'postgres.json');
  const user = await serverUser();
  const bin = await reachableBinaries(options.binaries ?? (await packagedBinariesDir()), user, systemDir, log);
  const dataDir = await chooseDataDir(root, user, systemDir);
  const logFile = path.join(path.dirname(dataDir), 'postgres.log');

  const settings = await withStartLock(root, async () => {
    let settings = await readSettings(settingsFile);
    const outsideHome = path.relative(root, dataDir).startsWith('..');
    if (!settings && outsideHome && existsSync(path.join(dataDir, 'PG_VERSION'))) {
      // Data kept outside a home that is gone (a checkout deleted and cloned again at the same path): its password
      // went with the old home. It is set aside, not deleted, and this home starts afresh.
      const aside = `${dataDir}.orphaned-${new Date().toISOString().replace(/[:.]/g, '-')}`;
      await fs.rename(dataDir, aside);
      log(`${dataDir} belonged to an earlier ${root} whose settings are gone; set aside as ${aside}`);
    }
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
      settings = { port: await freePort(), password: randomBytes(18).toString('base64url') };
      log(`initialising embedded Postgres in ${dataDir}`);
      await fs.rm(dataDir, { recursive: true, force: true });
      await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
      if (user) await fs.chown(dataDir, user.uid, user.gid);
      // Beside the data directory, which the server's user can reach (the temporary folder may be closed to it).
      const pwFile = path.join(path.dirname(dataDir), `.parlor-pw-${randomBytes(6).toString('hex')}`);
      await fs.writeFile(pwFile, settings.password + '\n', { mode: 0o600 });
      if (user) await fs.chown(pwFile, user.uid, user.gid);
      try {
        const init = await run(
          bin.initdb,
          [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwFile}`, '--encoding=UTF8', '--no-instructions'],
          user,
        );
        if (init.code !== 0) {
          throw new EmbeddedPostgresError(
            `initdb failed in ${dataDir}: ${lastLines(init.output)}` +
              (user ? ` (the postgres OS user must be able to reach ${root}; set PARLOR_HOME to a directory it can)` : ''),
          );
        }
      } finally {
        await fs.rm(pwFile, { force: true });
      }
      await fs.writeFile(settingsFile, JSON.stringify(settings), { mode: 0o600 });
    }
    if (!settings) throw new EmbeddedPostgresError(`${settingsFile} is missing or unreadable; remove ${dataDir} to start afresh`);

    const port = await runningPort(dataDir);
    if (port) {
      log(`sharing the embedded Postgres already running on port ${port}`);
      return { ...settings, port };
    }
    if (!(await portIsFree(settings.port))) {
      settings = { ...settings, port: await freePort() };
      await fs.writeFile(settingsFile, JSON.stringify(settings), { mode: 0o600 });
    }
    // Not for other users to read (the shell's own user among them): it names databases and users.
    if (user) await fs.writeFile(logFile, '', { mode: 0o640 }).then(() => fs.chmod(logFile, 0o640)).then(() => fs.chown(logFile, user.uid, user.gid));
    const options = `-p ${settings.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${socketDirFor(dataDir, settings.port) ?? ''} -c max_connections=200`;
    const started = await run(bin.pg_ctl, ['start', '-w', '-t', '60', '-D', dataDir, '-l', logFile, '-o', options], user);
    if (started.code !== 0) {
      const serverLog = await fs.readFile(logFile, 'utf8').catch(() => '');
      throw new EmbeddedPostgresError(`embedded Postgres did not start: ${lastLines(serverLog || started.output)} (log: ${logFile})`);
    }
    log(`embedded Postgres started on port ${settings.port}`);
    return settings;
  });

  const url = `postgres://postgres:${encodeURIComponent(settings.password)}@127.0.0.1:${settings.port}/postgres`;
  // A server started before it had a socket (and still running) is reached over TCP.
  const socketDir = socketDirFor(dataDir, settings.port);
  const localUrl = socketDir && existsSync(socketPath(socketDir, settings.port)) ? `${url}?host=${encodeURIComponent(socketDir)}` : url;
  return {
    url,
    localUrl,
    dataDir,
    release: async () => {
      if (await othersConnected(url)) {
        log('leaving the embedded Postgres running for the other Parlor process using it');
        return;
      }
      await run(bin.pg_ctl, ['stop', '-w', '-t', '30', '-m', 'fast', '-D', dataDir], user);
      log('embedded Postgres stopped');
    },
    restart: async (mode) => {
      // pg_ctl keeps the options the server was started with (postmaster.opts).
      const restarted = await run(bin.pg_ctl, ['restart', '-w', '-t', '60', '-m', mode, '-D', dataDir, '-l', logFile], user);
      if (restarted.code !== 0) throw new EmbeddedPostgresError(`embedded Postgres did not restart: ${lastLines(restarted.output)} (log: ${logFile})`);
      log(`embedded Postgres restarted (${mode})`);
    },
  };
}

async function othersConnected(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: `parlor:${process.pid}:exit` } });
  try {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where application_name like 'parlor:%' and split_part(application_name, ':', 2) <> ${String(process.pid)}`;
    return (row?.n ?? 0) > 0;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

function lastLines(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ');
}
