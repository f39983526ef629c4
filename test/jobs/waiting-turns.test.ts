// Reminders of one conversation that fall due together join one wake turn, also when they fire side by side.
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { joinWaitingWake } from '../../src/jobs/waiting-turns.ts';
import type { TurnJobData } from '../../src/turns.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
let jobs: JobSystem;
beforeAll(async () => {
  t = await createTestDatabase();
  jobs = await startJobSystem(t.database, pino({ level: 'silent' }), { poolSize: 1 });
});
afterAll(async () => {
  await jobs?.stop({ timeoutMs: 1000 });
  await t?.drop();
});

const wake = (conversationId: string, n: number) =>
  ({ conversationId, persona: 'ana', kind: 'wake', prompt: `prompt ${n}`, source: `reminder:${n}` }) satisfies TurnJobData;

it('a firing whose transaction began before the wake turn it joins was enqueued joins it', async () => {
  const conversation = 'ana:chat:side-by-side';
  // The second firing's transaction begins first (its now() is the earlier one), and waits for the first's lock.
  let joined: boolean | undefined;
  await t.database.db.transaction(async (second) => {
    await second.execute('select 1');
    await new Promise((resolve) => setTimeout(resolve, 20));
    await t.database.db.transaction(async (first) => {
      expect(await joinWaitingWake(first, wake(conversation, 1))).toBe(false);
      await jobs.enqueueTurn(wake(conversation, 1), first);
    });
    joined = await joinWaitingWake(second, wake(conversation, 2));
  });
  expect(joined).toBe(true);
  const rows = await t.database.sql`select data from pgboss.job where singleton_key = ${conversation}`;
  expect(rows.map((r) => r.data.prompt)).toEqual(['prompt 1\n\nprompt 2']);
  expect(rows[0].data.sources).toEqual(['reminder:1', 'reminder:2']);
});

it('a wake turn that is not due yet is not joined', async () => {
  const conversation = 'ana:chat:later';
  await t.database.sql`
    insert into pgboss.job (name, data, singleton_key, start_after, policy)
    values ('turn', ${JSON.stringify(wake(conversation, 1))}::jsonb, ${conversation}, now() + interval '1 hour', 'key_strict_fifo')`;
  await t.database.db.transaction(async (tx) => {
    expect(await joinWaitingWake(tx, wake(conversation, 2))).toBe(false);
  });
});
