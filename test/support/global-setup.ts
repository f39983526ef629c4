// One Postgres for the whole run: TEST_DATABASE_URL / DATABASE_URL when set, else an embedded one.
// Each test file then creates its own database on it (see test/support/database.ts).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';

let embedded: EmbeddedPostgres | undefined;
// A cluster of this run's own, so concurrent runs never stop each other's server.
const home = path.join(os.tmpdir(), `parlor-test-postgres-${process.pid}`);

export async function setup(project: TestProject) {
  // The `parlor` processes tests start run the bundle, as after an install: sources edited since would make them fall
  // back to tsx, a second or more of CPU at every start.
  execFileSync(process.execPath, [fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url))], { stdio: 'inherit' });
  let url = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!url) {
    embedded = await startEmbeddedPostgres(home);
    url = embedded.url;
  }
  project.provide('adminDatabaseUrl', url);
}

export async function teardown() {
  if (!embedded) return;
  await embedded.release();
  await fs.rm(home, { recursive: true, force: true });
  // Run as root with a temporary folder the postgres OS user cannot enter, the cluster lives under /var/lib/parlor.
  const dataParent = path.dirname(embedded.dataDir);
  if (dataParent !== home) await fs.rm(dataParent, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
  }
}
