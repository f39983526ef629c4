// Parlor writes a turn job's row itself (so that a message and its turn's job are one statement): the row must be the
// one pg-boss's send writes for the turn queue, or the queue would treat Parlor's jobs differently from its own.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { clientOf } from '../../src/db/client.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { insertTurnJob } from '../../src/jobs/turn-jobs.ts';
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

const row = async (id: string) => {
  const [job] = await t.database.sql`
    select *, keep_until - start_after as kept, start_after - created_on as delay from pgboss.job where id = ${id}::uuid`;
  // What differs between two jobs written a moment apart for two conversations.
  const { id: _id, data: _data, singleton_key: _key, created_on: _c, start_after: _s, keep_until: _k, ...rest } = job;
  return rest;
};

it("is the row pg-boss's send writes for the turn queue", async () => {
  const data = (conversationId: string): TurnJobData => ({ conversationId, persona: 'ana', kind: 'user' });
  const theirs = (await jobs.boss.send(QUEUES.turn, data('ana:chat:theirs') as never, { singletonKey: 'ana:chat:theirs' }))!;
  const ours = randomUUID();
  const [written] = await insertTurnJob(clientOf(t.database.db), ours, data('ana:chat:ours'));
  expect(written.id).toBe(ours);
  expect(await row(ours)).toEqual(await row(theirs));
  const [job] = await t.database.sql`select data, singleton_key from pgboss.job where id = ${ours}::uuid`;
  expect(job).toEqual({ data: data('ana:chat:ours'), singleton_key: 'ana:chat:ours' });
  // And the queue hands it out as its own.
  const fetched = await jobs.boss.fetch(QUEUES.turn, { batchSize: 10 });
  expect(fetched.map((j) => j.id).sort()).toEqual([ours, theirs].sort());
});

it('is written once for an id, and only where its condition holds', async () => {
  const id = randomUUID();
  const data: TurnJobData = { conversationId: 'ana:chat:once', persona: 'ana', kind: 'user' };
  const client = clientOf(t.database.db);
  expect(await insertTurnJob(client, id, data, false)).toHaveLength(0);
  expect(await insertTurnJob(client, id, data)).toHaveLength(1);
  expect(await insertTurnJob(client, id, data)).toHaveLength(0);
  expect(await jobs.enqueueTurn(data, undefined, { id })).toBeNull();
});
