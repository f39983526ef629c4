// What the benchmarks need: a scratch database (on DATABASE_URL / TEST_DATABASE_URL, or an embedded Postgres of
// their own) and percentiles.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { urlOfDatabase } from '../support/database-url.ts';

export interface BenchDatabase {
  url: string;
  /**
   * What a Parlor process under bench is given: on the embedded server, its Unix socket, as `parlor start` reaches its
   * own embedded Postgres (BENCH_TCP=1: over TCP, to compare); `url` on a given server.
   */
  parlorUrl: string;
  /** The embedded server's data directory (undefined on a given server): its processes' CPU is readable. */
  dataDir?: string;
  /** Whether pg_stat_statements is loaded and created in the database. */
  statements: boolean;
  drop(): Promise<void>;
}

/**
 * With `statements`, the embedded server is restarted with pg_stat_statements preloaded (the embedded build ships
 * it) and the extension is created in the bench database; a given server keeps whatever it has.
 */
export async function createBenchDatabase(options: { statements?: boolean } = {}): Promise<BenchDatabase> {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-bench-'));
  // Traversable by the postgres user (root runs Postgres as that user), so the data stays in the scratch folder.
  await fs.chmod(scratch, 0o711);
  const given = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  const home = path.join(scratch, 'home');
  let embedded = given ? undefined : await startEmbeddedPostgres(home);
  const adminUrl = given ?? embedded!.url;
  const name = `parlor_bench_${randomBytes(4).toString('hex')}`;
  let admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  if (options.statements && embedded) {
    // Read at start-up only: stopped and started again (nobody else uses this server yet).
    await admin.unsafe(`alter system set shared_preload_libraries = 'pg_stat_statements'`);
    await admin.unsafe(`alter system set pg_stat_statements.track_planning = on`);
    await admin.end();
    await embedded.release();
    embedded = await startEmbeddedPostgres(home);
    admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  }
  await admin.unsafe(`create database ${name}`);
  const url = urlOfDatabase(adminUrl, name);
  let statements = false;
  if (options.statements) {
    const bench = postgres(url, { max: 1, onnotice: () => {} });
    statements = await bench
      .unsafe('create extension if not exists pg_stat_statements')
      .then(() => true)
      .catch(() => false)
      .finally(() => bench.end());
  }
  // BENCH_DB_DELAY_MS: Parlor reaches the server through a proxy that holds everything it passes for that long each
  // way, as a database on another machine would (the bench's own connections go direct).
  const delayMs = Number(process.env.BENCH_DB_DELAY_MS ?? 0);
  const delayed = delayMs > 0 ? await startDelayProxy(url, delayMs) : undefined;
  return {
    url,
    parlorUrl: delayed?.url ?? (embedded && process.env.BENCH_TCP !== '1' ? urlOfDatabase(embedded.localUrl, name) : url),
    dataDir: embedded?.dataDir,
    statements,
    async drop() {
      await delayed?.close();
      await admin.unsafe(`drop database ${name} with (force)`);
      await admin.end();
      await embedded?.release();
      await fs.rm(scratch, { recursive: true, force: true });
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** A TCP pass-through to `serverUrl` that delivers each chunk `delayMs` later, in order, both ways. */
async function startDelayProxy(serverUrl: string, delayMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(serverUrl);
  const sockets = new Set<net.Socket>();
  const forward = (from: net.Socket, to: net.Socket) => {
    let due = 0;
    from.on('data', (chunk: Buffer) => {
      // Never before the chunk ahead of it: a later chunk does not overtake an earlier one.
      due = Math.max(performance.now() + delayMs, due);
      setTimeout(() => to.write(chunk), due - performance.now());
    });
    from.on('close', () => setTimeout(() => to.destroy(), delayMs));
    from.on('error', () => {});
  };
  const server = net.createServer((inbound) => {
    const outbound = net.createConnection({ host: target.hostname, port: Number(target.port) });
    sockets.add(inbound).add(outbound);
    forward(inbound, outbound);
    forward(outbound, inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(serverUrl);
  url.host = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    url: url.toString(),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
