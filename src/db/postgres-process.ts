import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { EmbeddedPostgresError } from '#src/db/embedded-postgres-error.ts';

const execFileAsync = promisify(execFile);

export interface OsUser {
  uid: number;
  gid: number;
}

/** The OS user that runs Postgres: ourselves (undefined), or `postgres` when we are root (Postgres refuses root). */
export async function serverUser(): Promise<OsUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async () => {
    const { stdout: uid } = await execFileAsync('id', ['-u', 'postgres']);
    const { stdout: gid } = await execFileAsync('id', ['-g', 'postgres']);
    return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
  };
  try {
    return await lookup();
  } catch {
    try {
      await execFileAsync('groupadd', ['--system', 'postgres']).catch(() => {});
      await execFileAsync('useradd', ['--system', '-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']);
      return await lookup();
    } catch (err) {
      throw new EmbeddedPostgresError(
        'running as root, and no `postgres` OS user exists or could be created to run the embedded Postgres; ' +
          'create one (useradd postgres) or set DATABASE_URL',
        { cause: err },
      );
    }
  }
}

/**
 * Runs a program as `user` (or as ourselves), collecting its output. The working directory is `/`: ours may be a
 * checkout the server's user cannot enter.
 */
export function runAs(file: string, args: string[], user: OsUser | undefined, env?: NodeJS.ProcessEnv) {
  return new Promise<{ code: number; output: string }>((resolve, reject) => {
    const child = spawn(file, args, {
      ...(user ?? {}),
      cwd: '/',
      env: { ...process.env, LC_ALL: 'C', LANG: 'C', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', (err) =>
      reject(new EmbeddedPostgresError(`could not run ${file}: ${err.message}; set DATABASE_URL to a Postgres server instead`, { cause: err })),
    );
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
