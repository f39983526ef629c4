// Root on a fresh machine: Postgres runs as the `postgres` OS user, which cannot enter a checkout under /root (or
// any mode-700 folder), so neither the binaries in its node_modules nor a PARLOR_HOME inside it.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedPostgresError, startEmbeddedPostgres, type EmbeddedPostgresOptions } from '../../src/db/embedded-postgres.ts';
import { packagedBinariesDir, reachableBinaries } from '../../src/db/postgres-binaries.ts';
import { serverUser } from '../../src/db/postgres-process.ts';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function scratch(mode: number): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-pg-'));
  await fs.chmod(dir, mode);
  cleanup.push(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

// The binaries package as `npm install` leaves it, inside a folder only root may enter.
let closedFolder: string;
let binaries: string;
beforeAll(async () => {
  closedFolder = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-pg-closed-'));
  await fs.chmod(closedFolder, 0o700);
  const pkg = path.join(closedFolder, 'linux-x64');
  await fs.cp(path.dirname(await packagedBinariesDir()), pkg, { recursive: true, verbatimSymlinks: true });
  binaries = path.join(pkg, 'native');
});
afterAll(() => fs.rm(closedFolder, { recursive: true, force: true }));

async function start(home: string, options: EmbeddedPostgresOptions) {
  const embedded = await startEmbeddedPostgres(home, () => {}, options);
  cleanup.push(() => embedded.release());
  return embedded;
}

async function query<T extends object>(url: string, text: string): Promise<T[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await sql.unsafe<T[]>(text);
  } finally {
    await sql.end();
  }
}

function copiesIn(systemDir: string): Promise<string[]> {
  return fs.readdir(systemDir).then((names) => names.filter((name) => name.startsWith('postgres-') || name.endsWith('.tmp')));
}

describe.skipIf(process.getuid?.() !== 0)('embedded Postgres started by root', () => {
  it('starts, accepts a connection and stops when its binaries sit in a folder the postgres user cannot enter', async () => {
    const systemDir = await scratch(0o755);
    const home = path.join(await scratch(0o755), 'home');

    const embedded = await start(home, { binaries, systemDir });
    const [row] = await query<{ two: number }>(embedded.url, 'select 1 + 1 as two');
    expect(row).toEqual({ two: 2 });

    const copies = await copiesIn(systemDir);
    expect(copies).toEqual([expect.stringMatching(/^postgres-18\.[\w.-]+-[0-9a-f]{12}$/)]);
    expect((await fs.stat(path.join(systemDir, copies[0]!))).mode & 0o777).toBe(0o755);

    await embedded.release();
    expect(existsSync(path.join(embedded.dataDir, 'postmaster.pid'))).toBe(false);
    await expect(query(embedded.url, 'select 1')).rejects.toThrow();
  });

  it('copies the binaries once when several starts need them at the same moment', async () => {
    const systemDir = await scratch(0o755);
    const user = await serverUser();

    const found = await Promise.all([1, 2, 3].map(() => reachableBinaries(binaries, user, systemDir, () => {})));

    expect(new Set(found.map((b) => b.dir)).size).toBe(1);
    expect(await copiesIn(systemDir)).toEqual([path.basename(found[0]!.dir)]);
    const version = execFileSync(found[0]!.postgres, ['-V'], { uid: user!.uid, gid: user!.gid, cwd: '/' }).toString();
    expect(version).toMatch(/^postgres \(PostgreSQL\) 18\./);
  });

  it('keeps the data of a PARLOR_HOME inside a mode-700 folder under the system folder, and finds it after a restart', async () => {
    const home = path.join(await scratch(0o700), 'home');
    const systemDir = await scratch(0o755);

    const first = await start(home, { systemDir });
    expect(first.dataDir.startsWith(systemDir + path.sep)).toBe(true);
    await query(first.url, 'create table kept (note text); insert into kept values (\'still here\')');
    await first.release();

    const second = await start(home, { systemDir });
    expect(second.dataDir).toBe(first.dataDir);
    expect(await query(second.url, 'select note from kept')).toEqual([{ note: 'still here' }]);
  });

  it('a checkout deleted and cloned again at the same path starts afresh: the old data, whose password went with it, is set aside', async () => {
    const parent = await scratch(0o700);
    const home = path.join(parent, 'home');
    const systemDir = await scratch(0o755);
    const first = await start(home, { systemDir });
    await query(first.url, 'create table old_clone (note text)');
    await first.release();
    // rm -rf the checkout (its .parlor with the password), then clone it again at the same path.
    await fs.rm(home, { recursive: true, force: true });

    const again = await start(home, { systemDir });
    expect(again.dataDir).toBe(first.dataDir);
    expect(await query(again.url, "select count(*)::int as n from pg_tables where tablename = 'old_clone'")).toEqual([{ n: 0 }]);
    const kept = (await fs.readdir(path.dirname(first.dataDir))).filter((name) => name.startsWith('postgres.orphaned-'));
    expect(kept).toHaveLength(1);
  });

  it('says in one line what to do when the binaries cannot be copied anywhere the postgres user can reach', async () => {
    const notAFolder = path.join(await scratch(0o755), 'file');
    await fs.writeFile(notAFolder, '');
    const home = path.join(await scratch(0o755), 'home');

    const failure = await startEmbeddedPostgres(home, () => {}, { binaries, systemDir: notAFolder }).catch((err: unknown) => err);

    expect(failure).toBeInstanceOf(EmbeddedPostgresError);
    const message = (failure as Error).message;
    expect(message).not.toContain('\n');
    expect(message).toContain(`cannot run the Postgres binaries in ${binaries}`);
    expect(message).toContain('set DATABASE_URL');
  });
});
