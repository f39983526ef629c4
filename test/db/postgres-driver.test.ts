// postgres.js as patched at install (patches/): a connection whose backend dies with a write of its own waiting
// (a transaction's ROLLBACK, a reserved connection's next query) rejects that query instead of throwing where nothing
// can catch it, and the pool goes on. Unpatched, the process died: a Postgres restart took Parlor down with it.
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

describe('postgres.js when a connection dies under it', () => {
  it('rejects what was in flight, answers the next query, and the process lives', async () => {
    const run = await execa('node', ['test/fixtures/postgres-close-race.mjs', t.url], { reject: false, timeout: 30_000 });
    expect(run.stderr).not.toMatch(/TypeError/);
    expect(run.exitCode, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(result.transaction).toBe('CONNECTION_CLOSED');
    expect(result.afterDeath).not.toBe('no answer');
    expect(result.pool).toBe('ok');
  });
});
