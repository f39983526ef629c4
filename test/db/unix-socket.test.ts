// A Parlor process reaches its embedded Postgres through the server's Unix socket (less work per statement on both
// sides than TCP), with both drivers: postgres.js for its own statements, node-postgres under pg-boss. A DATABASE_URL
// in libpq's socket form (`?host=/dir`) works the same way.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import postgres from 'postgres';
import { afterEach, describe, expect, it } from 'vitest';
import { connectDatabase, migrateDatabase, postgresTarget } from '../../src/db/client.ts';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { databaseUnavailable } from '../../src/db/unavailable.ts';
import { isTransientStoreError } from '../../src/ingress/dead-letters.ts';
import { startJobSystem } from '../../src/jobs/boss.ts';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function scratchHome(name = 'home'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-socket-'));
  // Traversable by the postgres user that runs the server when we are root.
  await fs.chmod(dir, 0o711);
  cleanup.push(() => fs.rm(dir, { recursive: true, force: true }));
  return path.join(dir, name);
}

async function embedded(home: string) {
  const server = await startEmbeddedPostgres(home);
  cleanup.push(() => server.release());
  return server;
}

/** How each connection of the session name reached the server: 'socket' (no client address) or 'tcp'. */
async function transports(url: string, applicationName: string): Promise<string[]> {
  const observer = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await observer<{ via: string }[]>`
      select case when client_addr is null then 'socket' else 'tcp' end as via from pg_stat_activity
      where application_name = ${applicationName} order by 1`;
    return rows.map((r) => r.via);
  } finally {
    await observer.end();
  }
}

/** Parlor's connections on `url` and pg-boss's beside them all reach the server through its socket. */
async function expectOnlyTheSocket(tcpUrl: string, url: string): Promise<void> {
  const database = await connectDatabase(url);
  cleanup.push(() => database.close());
  await migrateDatabase(database);
  const [row] = await database.sql<{ addr: string | null }[]>`select inet_client_addr()::text as addr`;
  expect(row.addr).toBeNull();
  const jobs = await startJobSystem(database, pino({ level: 'silent' }));
  cleanup.push(() => jobs.stop());
  const seen = await transports(tcpUrl, database.applicationName);
  expect(seen.length).toBeGreaterThanOrEqual(2);
  expect(new Set(seen)).toEqual(new Set(['socket']));
}

describe('postgresTarget', () => {
  it("takes libpq's host parameter: a directory is the socket's, a name is the host", () => {
    expect(postgresTarget('postgres://p:pw@127.0.0.1:6543/parlor?host=%2Fvar%2Frun%2Fpostgresql')).toEqual({
      url: 'postgres://p:pw@127.0.0.1:6543/parlor',
      options: { path: '/var/run/postgresql/.s.PGSQL.6543' },
    });
    expect(postgresTarget('postgres:///parlor?host=/run/pg&sslmode=disable')).toEqual({ url: 'postgres:///parlor?sslmode=disable', options: { path: '/run/pg/.s.PGSQL.5432' } });
    expect(postgresTarget('postgres:///parlor?host=/run/pg&port=6000')).toEqual({ url: 'postgres:///parlor', options: { path: '/run/pg/.s.PGSQL.6000', port: 6000 } });
    expect(postgresTarget('postgres://u@localhost/parlor?host=db.internal')).toEqual({ url: 'postgres://u@localhost/parlor', options: { host: 'db.internal' } });
    expect(postgresTarget('postgres://u@db:5432/parlor?sslmode=require')).toEqual({ url: 'postgres://u@db:5432/parlor?sslmode=require', options: {} });
  });
});

describe('the embedded Postgres over its Unix socket', () => {
  it("is what Parlor connects with: its own statements and pg-boss's both go through the socket", async () => {
    const server = await embedded(await scratchHome());
    expect(server.localUrl).toBe(`${server.url}?host=${encodeURIComponent(server.dataDir)}`);

    await expectOnlyTheSocket(server.url, server.localUrl);
  });

  it("a DATABASE_URL in libpq's socket form (?host=<dir>&port=<port>) reaches the server the same way", async () => {
    const server = await embedded(await scratchHome());
    const { password, port } = new URL(server.url);
    const given = `postgres://postgres:${password}@localhost/postgres?host=${encodeURIComponent(server.dataDir)}&port=${port}`;
    await expectOnlyTheSocket(server.url, given);
  });

  it("while the server restarts its socket's file is gone: that is the database away for a moment, as a refused connection is", async () => {
    const server = await embedded(await scratchHome());
    const { password, port } = new URL(server.url);
    const database = await connectDatabase(server.localUrl);
    cleanup.push(() => database.close());
    await database.sql`select 1`;
    await fs.rm(path.join(server.dataDir, `.s.PGSQL.${port}`));
    // A new connection finds no socket (the pool's first one is still open: a second client is asked).
    const fresh = postgres(`postgres://postgres:${password}@localhost/postgres`, { path: path.join(server.dataDir, `.s.PGSQL.${port}`), max: 1, onnotice: () => {}, connect_timeout: 5 });
    const err = await fresh`select 1`.then(() => undefined, (e: unknown) => e);
    await fresh.end();
    expect(err).toMatchObject({ code: 'ENOENT', syscall: 'connect' });
    expect(databaseUnavailable(err)).toBe(true);
    // An event whose store meets it is delivered again, never counted towards setting it aside.
    expect(isTransientStoreError(err)).toBe(true);
    // Wrapped as drizzle wraps it, too; and a file that is missing for any other reason is not the database.
    expect(databaseUnavailable(new Error('Failed query: select 1', { cause: err }))).toBe(true);
    expect(databaseUnavailable(Object.assign(new Error('no such file'), { code: 'ENOENT', syscall: 'open' }))).toBe(false);
  });

  it('is reached over TCP when the socket is not there (a server started without one)', async () => {
    const home = await scratchHome();
    const first = await embedded(home);
    await fs.rm(path.join(first.dataDir, `.s.PGSQL.${new URL(first.url).port}`));
    // A second process on the same home shares the running server.
    const second = await startEmbeddedPostgres(home);
    expect(second.localUrl).toBe(second.url);
    const database = await connectDatabase(second.localUrl);
    await expect(database.sql`select 1 as one`).resolves.toEqual([{ one: 1 }]);
    await database.close();
  });

  it('has no socket, and is reached over TCP, where the path would be too long for one', async () => {
    const home = await scratchHome('h'.repeat(100));
    const server = await embedded(home);
    expect(server.localUrl).toBe(server.url);
    const database = await connectDatabase(server.localUrl);
    await expect(database.sql`select 1 as one`).resolves.toEqual([{ one: 1 }]);
    await database.close();
  });
});
