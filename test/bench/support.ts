// What both benchmarks need: a scratch database (on DATABASE_URL / TEST_DATABASE_URL, or an embedded Postgres of
// their own) and percentiles.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';

export async function createBenchDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-bench-'));
  // Traversable by the postgres user (root runs Postgres as that user), so the data stays in the scratch folder.
  await fs.chmod(scratch, 0o711);
  const given = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  const embedded = given ? undefined : await startEmbeddedPostgres(path.join(scratch, 'home'));
  const adminUrl = given ?? embedded!.url;
  const name = `parlor_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
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
