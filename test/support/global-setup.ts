// One Postgres for the whole run: TEST_DATABASE_URL / DATABASE_URL when set, else an embedded one.
// Each test file then creates its own database on it (see test/support/database.ts).
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';

let embedded: EmbeddedPostgres | undefined;

export async function setup(project: TestProject) {
  let url = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!url) {
    embedded = await startEmbeddedPostgres(path.join(os.tmpdir(), 'parlor-test-postgres'));
    url = embedded.url;
  }
  project.provide('adminDatabaseUrl', url);
}

export async function teardown() {
  await embedded?.release();
}

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
  }
}
