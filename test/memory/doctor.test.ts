// parlor doctor says whether the database has pg_trgm (recall's trigram matching) and pgvector.
import fs from 'node:fs/promises';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { parseSettings } from '../../src/config/env.ts';
import { runDoctor } from '../../src/doctor.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { writePersonas } from '../support/harness.ts';

let t: TestDatabase;
let personasDir: string;

beforeAll(async () => {
  t = await createTestDatabase();
  personasDir = await writePersonas({ testy: {} });
});
afterAll(async () => {
  await t?.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
});

async function doctorLines(databaseUrl: string): Promise<string[]> {
  let out = '';
  const stream = new Writable({ write: (chunk, _enc, done) => ((out += String(chunk)), done()) });
  const settings = parseSettings({ DATABASE_URL: databaseUrl, LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', PARLOR_PERSONAS_DIR: personasDir });
  await runDoctor(settings, stream);
  return out.split('\n');
}

describe('doctor', () => {
  it('reports pg_trgm installed by the migration, and whether the server has pgvector', async () => {
    const sql = postgres(t.url, { max: 1, onnotice: () => {} });
    const [vector] = await sql`select count(*)::int as n from pg_available_extensions where name = 'vector'`;
    await sql.end();
    const lines = await doctorLines(t.url);
    expect(lines).toContain('✓ pg_trgm: installed: recall matches names and misspellings');
    expect(lines).toContain(
      vector.n
        ? '✓ pgvector: installed: recall finds the rows nearest in meaning by its HNSW index (with an embedding endpoint)'
        : '✓ pgvector: not on this server: recall compares embeddings in the process (with an embedding endpoint)',
    );
    expect(lines.indexOf('✓ pg_trgm: installed: recall matches names and misspellings')).toBe(lines.findIndex((l) => l.startsWith('✓ database:')) + 1);
  });

  it('says a migrated database without pg_trgm ranks by full-text search alone', async () => {
    const sql = postgres(t.url, { max: 1, onnotice: () => {} });
    await sql`drop extension pg_trgm cascade`;
    await sql.end();
    expect(await doctorLines(t.url)).toContain(
      '! pg_trgm: on the server but not created in this database (a superuser can CREATE EXTENSION pg_trgm there): recall ranks by full-text search alone',
    );
  });

  it('shows no extension lines when the database cannot be reached', async () => {
    const url = new URL(t.url);
    url.port = '9';
    const lines = await doctorLines(url.toString());
    expect(lines.some((l) => l.startsWith('✗ database:'))).toBe(true);
    expect(lines.some((l) => /pg_trgm|pgvector/.test(l))).toBe(false);
  });
});
