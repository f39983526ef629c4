// A turn job this process stored is taken from the queue by its turn's start, in the same statement, instead of a
// fetch: only when pg-boss's fetch would hand it out (waiting, and its conversation's next), and never twice.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConversation } from '../../src/db/conversations.ts';
import { insertMessage } from '../../src/db/messages.ts';
import { insertOutbound, markOutboundSent } from '../../src/db/outbound-messages.ts';
import { claimTurnOfJob, insertTurn, startUserTurn } from '../../src/db/turns.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
let jobs: JobSystem;

beforeAll(async () => {
  t = await createTestDatabase();
  jobs = await startJobSystem(t.database, pino({ level: 'silent' }), { poolSize: 2 });
});
afterAll(async () => {
  await jobs.stop({ timeoutMs: 1000 });
  await t.drop();
});

/** A conversation with a message waiting and its turn job in the queue, as the ingress leaves them. */
async function waiting(conversationId = `ana:chat:${randomUUID().slice(0, 8)}`) {
  await ensureConversation(t.database.db, { id: conversationId, persona: 'ana' });
  await insertMessage(t.database.db, { conversationId, message: { role: 'user', content: 'hi' } });
  const jobId = (await jobs.enqueueTurn({ conversationId, persona: 'ana', kind: 'user' }, undefined, { id: randomUUID() }))!;
  return { conversationId, jobId };
}

const start = (conversationId: string, jobId: string, turnId = randomUUID()) =>
  startUserTurn(t.database.db, { id: turnId, conversationId, persona: 'ana', jobId }, { claimJob: true });

const jobState = async (id: string) =>
  (await t.database.sql<{ state: string; retry_count: number }[]>`select state::text, retry_count from pgboss.job where id = ${id}::uuid`)[0];
const turnsOf = async (conversationId: string) => (await t.database.sql`select id from turns where conversation_id = ${conversationId}`).length;

describe("a turn's start taking its job from the queue", () => {
  it('takes a waiting job as a fetch would, so that its completion and heartbeat find it', async () => {
    const { conversationId, jobId } = await waiting();
    const begun = await start(conversationId, jobId);
    expect(begun.jobClaimed).toBe(true);
    expect(begun.claimed).toHaveLength(1);
    expect(await jobState(jobId)).toEqual({ state: 'active', retry_count: 0 });
    // A fetch does not hand it out again.
    expect(await jobs.boss.fetch(QUEUES.turn, { batchSize: 10 })).toEqual([]);
    expect((await jobs.boss.touch(QUEUES.turn, [{ id: jobId, retryCount: 0 }]) as { settled?: string[] }).settled).toEqual([jobId]);
    await jobs.boss.complete(QUEUES.turn, [{ id: jobId, retryCount: 0 }]);
    expect((await jobState(jobId)).state).toBe('completed');
  });

  it("asked to take it only while messages wait, leaves the job of a message that was not stored (a redelivery)", async () => {
    const conversationId = `ana:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(t.database.db, { id: conversationId, persona: 'ana' });
    const jobId = (await jobs.enqueueTurn({ conversationId, persona: 'ana', kind: 'user' }, undefined, { id: randomUUID() }))!;
    const withMessages = (turnId = randomUUID()) =>
      startUserTurn(t.database.db, { id: turnId, conversationId, persona: 'ana', jobId }, { claimJob: 'with messages' });
    expect(await withMessages()).toMatchObject({ jobClaimed: false, claimed: [] });
    expect(await jobState(jobId)).toEqual({ state: 'created', retry_count: 0 });
    // With a message waiting, it is taken.
    await insertMessage(t.database.db, { conversationId, message: { role: 'user', content: 'hi' } });
    expect(await withMessages()).toMatchObject({ jobClaimed: true, claimed: [expect.anything()] });
    expect((await jobState(jobId)).state).toBe('active');
    await jobs.boss.complete(QUEUES.turn, [{ id: jobId, retryCount: 0 }]);
  });

  it('leaves a job another process fetched first, writing nothing', async () => {
    const { conversationId, jobId } = await waiting();
    const [fetched] = await jobs.boss.fetch(QUEUES.turn, { batchSize: 10 });
    expect(fetched.id).toBe(jobId);
    const begun = await start(conversationId, jobId);
    expect(begun).toMatchObject({ jobClaimed: false, claimed: [] });
    expect(await turnsOf(conversationId)).toBe(0);
    // The message still waits for the turn of the process that has the job.
    const other = await startUserTurn(t.database.db, { id: randomUUID(), conversationId, persona: 'ana', jobId });
    expect(other.claimed).toHaveLength(1);
  });

  it("leaves a job that is not its conversation's next: one stored before it waits, or one of the conversation runs", async () => {
    const first = await waiting();
    const { jobId: second } = await waiting(first.conversationId);
    expect(await start(first.conversationId, second)).toMatchObject({ jobClaimed: false, claimed: [] });
    expect((await jobState(second)).state).toBe('created');
    // The first is its next; once it runs, the second waits for it to end.
    expect((await start(first.conversationId, first.jobId)).jobClaimed).toBe(true);
    expect(await start(first.conversationId, second)).toMatchObject({ jobClaimed: false, claimed: [] });
    expect(await turnsOf(first.conversationId)).toBe(1);
    await jobs.boss.complete(QUEUES.turn, [{ id: first.jobId, retryCount: 0 }]);
    expect((await start(first.conversationId, second)).jobClaimed).toBe(true);
  });

  it('takes a job once when two starts race for it', async () => {
    const { conversationId, jobId } = await waiting();
    const results = await Promise.all([start(conversationId, jobId), start(conversationId, jobId)]);
    expect(results.map((r) => r.jobClaimed).sort()).toEqual([false, true]);
    expect(await turnsOf(conversationId)).toBe(1);
  });

  it('takes a job that is due later only when it is due', async () => {
    const conversationId = `ana:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(t.database.db, { id: conversationId, persona: 'ana' });
    await insertMessage(t.database.db, { conversationId, message: { role: 'user', content: 'later' } });
    const jobId = (await jobs.boss.send(QUEUES.turn, { conversationId, persona: 'ana', kind: 'user' }, { singletonKey: conversationId, startAfter: 60 }))!;
    expect((await start(conversationId, jobId)).jobClaimed).toBe(false);
    await t.database.sql`update pgboss.job set start_after = now() - interval '1 second' where id = ${jobId}::uuid`;
    expect((await start(conversationId, jobId)).jobClaimed).toBe(true);
  });
});

describe("a turn's job completed with its reply's sent mark", () => {
  /** A turn begun on its job, and its reply written to the ledger (as the turn leaves them before the send). */
  async function replying() {
    const { conversationId, jobId } = await waiting();
    const turnId = randomUUID();
    expect((await start(conversationId, jobId, turnId)).jobClaimed).toBe(true);
    const row = (await insertOutbound(t.database.db, {
      dedupeKey: `turn:${turnId}:reply`, turnId, conversationId, connector: 'chat', chat: conversationId, text: 'hi', status: 'sending', claimedBy: 'me',
    }))!;
    return { conversationId, jobId, turnId, row };
  }
  const end = { status: 'ok', inputTokens: 1, outputTokens: 1, modelCalls: 1 };

  it('is completed in the same statement, as the queue completes it: the conversation’s next job is handed out', async () => {
    const { conversationId, jobId, row } = await replying();
    const { jobId: next } = await waiting(conversationId);
    expect(await jobs.boss.fetch(QUEUES.turn, { batchSize: 10 })).toEqual([]);
    expect(await markOutboundSent(t.database.db, row.id, ['m1'], 1, { ...end, job: { id: jobId, retryCount: 0 } })).toEqual({ jobCompleted: true });
    expect((await jobState(jobId)).state).toBe('completed');
    expect((await jobs.boss.fetch(QUEUES.turn, { batchSize: 10 })).map((j) => j.id)).toEqual([next]);
    await jobs.boss.complete(QUEUES.turn, [{ id: next, retryCount: 0 }]);
  });

  it('is left to the queue when the attempt no longer holds it (taken back and handed out again)', async () => {
    const { jobId, row } = await replying();
    expect(await markOutboundSent(t.database.db, row.id, ['m2'], 1, { ...end, job: { id: jobId, retryCount: 1 } })).toEqual({ jobCompleted: false });
    expect(await jobState(jobId)).toEqual({ state: 'active', retry_count: 0 });
    // The message and the turn's end are recorded all the same.
    const [ledger] = await t.database.sql`select status from outbound_messages where id = ${row.id}`;
    expect(ledger.status).toBe('sent');
    await jobs.boss.complete(QUEUES.turn, [{ id: jobId, retryCount: 0 }]);
  });

  it('is not completed when the sent mark finds no message to mark', async () => {
    const { jobId } = await replying();
    expect(await markOutboundSent(t.database.db, -1, ['m3'], 1, { ...end, job: { id: jobId, retryCount: 0 } })).toEqual({ jobCompleted: false });
    expect((await jobState(jobId)).state).toBe('active');
    await jobs.boss.complete(QUEUES.turn, [{ id: jobId, retryCount: 0 }]);
  });
});

describe("a turn's start behind a message's COMMIT, on the ingress's connection", () => {
  // The job it takes is known to be this process's once it answers: were a crash of Postgres to lose the start after
  // that, the job would wait in the queue again while the turn runs on, and a fetch could hand it out, complete it and
  // let the conversation's next message be answered first. So its commit waits for the disk, as the connection's do.
  it('waits for the disk, and leaves the connection as it was', async () => {
    const { conversationId, jobId } = await waiting();
    const c = await t.database.sql.reserve();
    try {
      // The WAL flushes this connection's own session made (the server's WAL writer flushes an unwaited commit).
      const flushes = async () => {
        await c`select pg_stat_force_next_flush()`;
        const [row] = await c<{ n: number }[]>`select coalesce(sum(fsyncs), 0)::int as n from pg_stat_get_backend_io(pg_backend_pid()) where object = 'wal'`;
        return row.n;
      };
      const before = await flushes();
      expect((await startUserTurn(c, { id: randomUUID(), conversationId, persona: 'ana', jobId }, { claimJob: 'with messages' })).jobClaimed).toBe(true);
      expect(await flushes()).toBe(before + 1);
      const [{ synchronous_commit }] = await c`show synchronous_commit`;
      expect(synchronous_commit).toBe('on');
    } finally {
      c.release();
    }
    await jobs.boss.complete(QUEUES.turn, [{ id: jobId, retryCount: 0 }]);
  });
});

describe("a turn of a job run again", () => {
  /** A turn of a job, running (or ended), claimed by `claimedBy`. */
  async function turnOfJob(claimedBy: string | null, status = 'running') {
    const conversationId = `ana:chat:${randomUUID().slice(0, 8)}`;
    const jobId = randomUUID();
    const turnId = randomUUID();
    await ensureConversation(t.database.db, { id: conversationId, persona: 'ana' });
    await insertTurn(t.database.db, { id: turnId, conversationId, kind: 'user', jobId, ...(claimedBy ? { claimedBy } : {}) });
    if (status !== 'running') await t.database.sql`update turns set status = ${status} where id = ${turnId}`;
    return { jobId, turnId };
  }
  const claimedBy = async (turnId: string) => (await t.database.sql`select claimed_by from turns where id = ${turnId}`)[0].claimed_by;
  const me = 'parlor:me-the-rerun';

  it('is taken over from a process that is gone, from none, or from this one', async () => {
    for (const holder of ['parlor:gone-long-ago', null, me]) {
      const { jobId, turnId } = await turnOfJob(holder);
      expect(await claimTurnOfJob(t.database.db, jobId, me)).toMatchObject({ id: turnId, claimedBy: me });
    }
  });

  it('is left to a live process that still runs it: held', async () => {
    const live = t.database.applicationName;
    const { jobId, turnId } = await turnOfJob(live);
    expect(await claimTurnOfJob(t.database.db, jobId, me)).toBe('held');
    expect(await claimedBy(turnId)).toBe(live);
    // Once it has ended, it is this run's to read (and finish).
    await t.database.sql`update turns set status = 'ok' where id = ${turnId}`;
    expect(await claimTurnOfJob(t.database.db, jobId, me)).toMatchObject({ id: turnId, status: 'ok' });
  });

  it('is none for a job that has no turn', async () => {
    expect(await claimTurnOfJob(t.database.db, randomUUID(), me)).toBeUndefined();
  });
});

describe('a start asked for a relaxed commit (behind its message, on a connection whose commits wait for the disk)', () => {
  it('does not wait for the disk at its own commit, and leaves the connection as it was for the next transaction', async () => {
    const { conversationId, jobId } = await waiting();
    const c = await t.database.sql.reserve();
    try {
      expect((await c`show synchronous_commit`)[0].synchronous_commit).toBe('on');
      // Its own transaction here, to look inside it before the commit.
      await c`begin`;
      const begun = await startUserTurn(c, { id: randomUUID(), conversationId, persona: 'ana', jobId }, { claimJob: 'with messages', relaxedCommit: true });
      expect(begun).toMatchObject({ jobClaimed: true, claimed: [expect.anything()] });
      expect((await c`show synchronous_commit`)[0].synchronous_commit).toBe('off');
      await c`commit`;
      // The next message's transaction on this connection waits for the disk again.
      expect((await c`show synchronous_commit`)[0].synchronous_commit).toBe('on');
      // As a statement of its own (as the ingress sends it), too.
      const next = await waiting();
      await startUserTurn(c, { id: randomUUID(), conversationId: next.conversationId, persona: 'ana', jobId: next.jobId }, { claimJob: 'with messages', relaxedCommit: true });
      expect((await c`show synchronous_commit`)[0].synchronous_commit).toBe('on');
      await jobs.boss.complete(QUEUES.turn, [{ id: jobId, retryCount: 0 }, { id: next.jobId, retryCount: 0 }]);
    } finally {
      c.release();
    }
  });
});
