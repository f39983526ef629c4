// pg-boss's statements go to Postgres as named statements, prepared once per connection: planning its fetch at
// every call cost more than running it. A text of several statements still runs, and so does a new connection.
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let db: TestDatabase;
let jobs: JobSystem;

beforeAll(async () => {
  db = await createTestDatabase();
  jobs = await startJobSystem(db.database, pino({ level: 'silent' }), { poolSize: 2 });
});
afterAll(async () => {
  await jobs.stop({ timeoutMs: 1000 });
  await db.drop();
});
afterEach(() => vi.restoreAllMocks());

/** What pg-boss's pool is asked to run while `fn` runs: each statement's text and its name, if any. */
async function statementsDuring(fn: () => Promise<unknown>): Promise<{ name?: string; text: string }[]> {
  const seen: { name?: string; text: string }[] = [];
  // pg-boss's own pool (node-postgres), which runs every statement not given a connection of the caller's.
  const pool = (jobs.boss.getDb() as unknown as { pool: { query: (...args: unknown[]) => unknown } }).pool;
  const query = pool.query.bind(pool);
  vi.spyOn(pool, 'query').mockImplementation((config: unknown, ...rest: unknown[]) => {
    if (typeof config === 'string') seen.push({ text: config });
    else seen.push({ name: (config as { name?: string }).name, text: (config as { text: string }).text });
    return query(config, ...rest);
  });
  await fn();
  vi.restoreAllMocks();
  return seen;
}

const turn = (conversationId: string) => ({ conversationId, persona: 'ana', kind: 'user' as const });

async function fetchAndComplete(): Promise<string> {
  const [job] = await jobs.boss.fetch(QUEUES.turn);
  expect(job).toBeDefined();
  await jobs.boss.complete(QUEUES.turn, job.id);
  return job.id;
}

describe("pg-boss's statements", () => {
  it('fetch and complete are named, one name per text, and the jobs move on', async () => {
    const ids = await Promise.all(['c1', 'c2', 'c3'].map((c) => jobs.enqueueTurn(turn(c))));
    const seen = await statementsDuring(async () => {
      for (let i = 0; i < 3; i++) await fetchAndComplete();
    });
    const fetches = seen.filter((s) => s.text.includes('strict_fifo_heads'));
    const completes = seen.filter((s) => /completed_on = /.test(s.text));
    expect(fetches).toHaveLength(3);
    expect(completes).toHaveLength(3);
    expect(new Set(fetches.map((s) => s.name)).size).toBe(1);
    expect(fetches[0].name).toMatch(/^pgboss_\d+$/);
    expect(completes[0].name).toMatch(/^pgboss_\d+$/);
    expect(completes[0].name).not.toBe(fetches[0].name);
    for (const id of ids) expect((await jobs.boss.getJobById(QUEUES.turn, id!))?.state).toBe('completed');
  });

  it('a text of several statements runs unnamed, as one', async () => {
    const execute = jobs.boss.getDb().executeSql.bind(jobs.boss.getDb());
    let result: unknown;
    const seen = await statementsDuring(async () => {
      result = await execute('begin; select 1 as one; commit', []);
    });
    expect(seen).toEqual([{ text: 'begin; select 1 as one; commit' }]);
    expect((result as { rows: unknown }[]).some((r) => JSON.stringify(r.rows) === '[{"one":1}]')).toBe(true);
  });

  it('still work on new connections, after the old ones were closed under them', async () => {
    await jobs.enqueueTurn(turn('c4'));
    await fetchAndComplete();
    // Both of pg-boss's connections (its pool holds two here), found by asking on both at once, are closed.
    const execute = jobs.boss.getDb().executeSql.bind(jobs.boss.getDb());
    const pids = await Promise.all([1, 2].map(() => execute('select pg_backend_pid() as pid, pg_sleep(0.1)', []).then((r) => r.rows[0].pid as number)));
    expect(new Set(pids).size).toBe(2);
    await db.database.sql`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid`;
    await jobs.enqueueTurn(turn('c5'));
    // The first statement on a closed connection fails; its pool then opens a new one, which prepares again.
    const fetched = await fetchAndComplete().catch(fetchAndComplete);
    expect(fetched).toBeDefined();
  });
});
