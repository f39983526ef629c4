// The turn workers of one process over real pg-boss: several jobs fetched by one statement, a conversation's next
// job fetched as soon as its turn ends (not at the next poll), a running job kept alive and stopped once the queue
// has taken it back, and every job given back at shutdown.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobNotClaimed, type TurnJob, type TurnRunner } from '../../src/agent/turn-runner.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { turnNotice } from '../../src/db/channels.ts';
import { startTurnWorkers, type TurnWorkers } from '../../src/jobs/workers.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { countFetches, startSettledWorkers } from '../support/fetch-counter.ts';
import { until } from '../support/until.ts';

let db: TestDatabase;
let jobs: JobSystem;
let workers: TurnWorkers | undefined;
const log = pino({ level: 'silent' });

beforeAll(async () => {
  db = await createTestDatabase();
  jobs = await startJobSystem(db.database, log);
});
afterEach(async () => {
  await workers?.stop(0);
  workers = undefined;
});
afterAll(async () => {
  await jobs?.stop();
  await db?.drop();
});

/** A runner whose turns end when the test says so. */
function heldRunner() {
  const started: { job: TurnJob; at: number; end: () => void; fail: (err: Error) => void }[] = [];
  const runner: TurnRunner = {
    run: (job) =>
      new Promise<void>((resolve, reject) => {
        started.push({ job, at: Date.now(), end: resolve, fail: reject });
        job.signal?.addEventListener('abort', () => reject(new Error('released')), { once: true });
      }),
    cancel: () => false,
    interruptAll: () => {},
    interrupt: () => {},
    beginIn: () => Promise.reject(new Error('a turn begun in its message transaction is not used here')),
  };
  return { runner, started };
}

/** Workers whose first fetch has ended (see startSettledWorkers). */
async function settledWorkers(runner: TurnRunner, options: { concurrency: number; heartbeatMs?: number; fetchEveryMs?: number }) {
  const { workers: started, fetches } = await startSettledWorkers(jobs, db.database.sql, runner, { ...options, log });
  fetches.restore();
  return started;
}

const enqueue = (conversationId: string) => jobs.enqueueTurn({ conversationId, persona: 'p', kind: 'wake', prompt: 'x' });
const state = async (id: string) => (await db.database.sql`select state, heartbeat_on, started_on from pgboss.job where id = ${id}`)[0];

describe('turn workers', () => {
  it('take a job for every free place in one fetch', async () => {
    const { runner, started } = heldRunner();
    const conversations = Array.from({ length: 5 }, () => `p:chat:${randomUUID()}`);
    for (const c of conversations) await enqueue(c);
    const fetches = countFetches(jobs.boss);
    try {
      workers = await startTurnWorkers(jobs, db.database.sql, runner, { concurrency: 8, pollSeconds: 60, log });
      await until(() => started.length === 5, 5000);
      expect(fetches.count).toBe(1);
      expect(new Set(started.map((s) => s.job.data.conversationId))).toEqual(new Set(conversations));
    } finally {
      fetches.restore();
      for (const s of started) s.end();
    }
  });

  /**
   * A first turn runs; `second`'s job is enqueued meanwhile and cannot start (its conversation's turn runs, or every
   * place is taken). Once the first ends, the second starts at once, not at the next poll (a minute away).
   */
  async function startsWhenTheFirstEnds(concurrency: number, first: string, second: string) {
    const { runner, started } = heldRunner();
    workers = await startTurnWorkers(jobs, db.database.sql, runner, { concurrency, pollSeconds: 60, log });
    await enqueue(first);
    await until(() => started.length === 1, 5000);
    await enqueue(second);
    await new Promise((r) => setTimeout(r, 300));
    expect(started).toHaveLength(1);
    const ended = Date.now();
    started[0].end();
    await until(() => started.length === 2, 5000);
    expect(started[1].at - ended).toBeLessThan(3000);
    expect(started[1].job.data.conversationId).toBe(second);
    started[1].end();
  }

  it('fetch a conversation’s next job as soon as its turn ends, without waiting for the poll', async () => {
    const conversation = `p:chat:${randomUUID()}`;
    await startsWhenTheFirstEnds(4, conversation, conversation);
  });

  it('fetch a job announced while every place was taken as soon as a place is free', async () => {
    await startsWhenTheFirstEnds(1, `p:chat:${randomUUID()}`, `p:chat:${randomUUID()}`);
  });

  it('fetch at once a job this process announces, and let its notification pass without a second fetch, in either order', async () => {
    const { runner, started } = heldRunner();
    workers = await startTurnWorkers(jobs, db.database.sql, runner, { concurrency: 4, pollSeconds: 60, log });
    const fetches = countFetches(jobs.boss);
    try {
      const conversation = `p:chat:${randomUUID()}`;
      // Sent without a notification, as a process's own ingress does when it announces the job itself.
      const id = (await jobs.boss.send(QUEUES.turn, { conversationId: conversation, persona: 'p', kind: 'wake', prompt: 'x' }, { singletonKey: conversation }))!;
      workers.announce(conversation, id);
      await until(() => started.length === 1, 3000);
      await db.database.sql`select pg_notify('parlor_turn', ${turnNotice(conversation, id)})`;
      await new Promise((r) => setTimeout(r, 300));
      expect(fetches.count).toBe(1);
      // The other order: the notification comes first (as it often does), then the ingress says so.
      const other = `p:chat:${randomUUID()}`;
      const second = (await jobs.boss.send(QUEUES.turn, { conversationId: other, persona: 'p', kind: 'wake', prompt: 'x' }, { singletonKey: other }))!;
      await db.database.sql`select pg_notify('parlor_turn', ${turnNotice(other, second)})`;
      await until(() => started.length === 2, 3000);
      workers.announce(other, second);
      await new Promise((r) => setTimeout(r, 300));
      expect(fetches.count).toBe(2);
      for (const s of started) s.end();
    } finally {
      fetches.restore();
    }
  });

  it("run a job its own ingress stored without a fetch, its turn's start taking it; fetched as usual when that start cannot", async () => {
    const { runner, started } = heldRunner();
    workers = await settledWorkers(runner, { concurrency: 4 });
    const fetches = countFetches(jobs.boss);
    try {
      const conversation = `p:chat:${randomUUID()}`;
      const data = { conversationId: conversation, persona: 'p', kind: 'user' as const };
      const id = randomUUID();
      // As the ingress does: said before the job is stored; its notification comes back before the commit is confirmed.
      workers.expect(id);
      await jobs.boss.send(QUEUES.turn, data, { id, singletonKey: conversation });
      await db.database.sql`select pg_notify('parlor_turn', ${turnNotice(conversation, id)})`;
      await new Promise((r) => setTimeout(r, 300));
      expect(started).toHaveLength(0);
      workers.announce(conversation, id, data);
      await until(() => started.length === 1, 3000);
      expect(started[0].job).toMatchObject({ id, data, retryCount: 0, claim: expect.anything() });
      expect(fetches.count).toBe(0);
      // Its start could not take it (here: nothing took it, so the fetch finds it waiting).
      started[0].fail(new JobNotClaimed('not taken'));
      await until(() => started.length === 2, 3000);
      expect(fetches.count).toBe(1);
      expect(started[1].job).toMatchObject({ id, retryCount: 0 });
      expect(started[1].job.claim).toBeUndefined();
      expect((await state(id)).state).toBe('active');
      started[1].end();
      await until(async () => (await state(id)).state === 'completed', 3000);
    } finally {
      fetches.restore();
    }
  });

  describe('while every place is taken', () => {
    /** A runner whose turns, begun with their job not taken, take it from the queue first (as a user turn's start does). */
    function claimingRunner() {
      const held = { ...heldRunner(), refused: [] as string[] };
      const run = held.runner.run;
      held.runner.run = async (job) => {
        if (job.claim && !job.claim.taken) {
          const taken = await db.database.sql`update pgboss.job set state = 'active', started_on = now() where id = ${job.id}::uuid and state = 'created' returning id`;
          if (taken.length === 0) {
            held.refused.push(job.id);
            throw new JobNotClaimed('not taken');
          }
          job.claim.taken = true;
        }
        return run(job);
      };
      return held;
    }
    /** A user turn's job of a new conversation, stored and announced by this process's ingress. */
    async function storeUserJob() {
      const conversation = `p:chat:${randomUUID()}`;
      const data = { conversationId: conversation, persona: 'p', kind: 'user' as const };
      const id = randomUUID();
      workers!.expect(id);
      await jobs.boss.send(QUEUES.turn, data, { id, singletonKey: conversation });
      workers!.announce(conversation, id, data);
      return id;
    }
    /** One place, taken by a user turn; then jobs of `others`, stored by this process's ingress meanwhile. */
    async function storedWhileTaken(others: number, fetchEveryMs = 60_000) {
      const { runner, started, refused } = claimingRunner();
      workers = await settledWorkers(runner, { concurrency: 1, fetchEveryMs });
      const first = await storeUserJob();
      await until(() => started.length === 1, 3000);
      const ids: string[] = [];
      for (let i = 0; i < others; i++) ids.push(await storeUserJob());
      await new Promise((r) => setTimeout(r, 200));
      expect(started).toHaveLength(1);
      return { started, first, ids, refused };
    }

    /** Ends the turns one by one; the jobs that started in the freed places, and the fetches meanwhile. */
    async function endOneByOne(started: { job: TurnJob; end: () => void }[], n: number) {
      const fetches = countFetches(jobs.boss);
      try {
        for (let i = 1; i <= n; i++) {
          started[i - 1].end();
          await until(() => started.length === i + 1, 3000);
          await until(async () => (await state(started[i - 1].job.id)).state === 'completed', 3000);
        }
        started[n].end();
        return { next: started.slice(1).map((s) => ({ id: s.job.id, claimed: s.job.claim !== undefined })), fetches: fetches.count };
      } finally {
        fetches.restore();
      }
    }

    it('give a place that frees to the oldest job this process stored, its start taking it, with no fetch', async () => {
      const { started, ids } = await storedWhileTaken(4);
      const { next, fetches } = await endOneByOne(started, 4);
      expect(next).toEqual(ids.map((id) => ({ id, claimed: true })));
      expect(fetches).toBe(0);
    });

    it('give places to fetches, once one finds jobs waiting that this process did not store, until they are through', async () => {
      const { runner, started } = claimingRunner();
      workers = await settledWorkers(runner, { concurrency: 1, fetchEveryMs: 1000 });
      await storeUserJob();
      await until(() => started.length === 1, 3000);
      // Waiting before them: two wake turns (a reminder's, say), which the queue holds and this process did not store.
      const wakes = [await enqueue(`p:chat:${randomUUID()}`), await enqueue(`p:chat:${randomUUID()}`)];
      const stored = [await storeUserJob(), await storeUserJob(), await storeUserJob()];
      // Past the time a fetch is due: the next place goes to one, which finds the first wake turn.
      await new Promise((r) => setTimeout(r, 1100));
      const { next } = await endOneByOne(started, 5);
      expect(next.map((n) => n.id)).toEqual([...wakes, ...stored]);
      // The wake turns and the oldest stored one by fetches (the last of which found only what this process stored).
      expect(next.map((n) => n.claimed)).toEqual([false, false, false, true, true]);
    });

    it('leave stored jobs that another process took to it, fetch the next, and forget what it stored', async () => {
      const { started, ids, refused } = await storedWhileTaken(3);
      // Another process fetched the two oldest meanwhile.
      await db.database.sql`update pgboss.job set state = 'active', started_on = now() where id in ${db.database.sql([ids[0], ids[1]])}`;
      const fetches = countFetches(jobs.boss);
      try {
        started[0].end();
        await until(() => started.length === 2, 3000);
        expect(started[1].job.id).toBe(ids[2]);
        expect(fetches.count).toBeGreaterThanOrEqual(1);
        // One start found what was stored out of date: the second job taken elsewhere costs no start of its own.
        started[1].end();
        await new Promise((r) => setTimeout(r, 300));
        expect(started).toHaveLength(2);
        expect(refused).toEqual([ids[0]]);
      } finally {
        fetches.restore();
      }
    });
  });

  it('keep a job taken by its start alive only once it is taken', async () => {
    const { runner, started } = heldRunner();
    workers = await settledWorkers(runner, { concurrency: 4, heartbeatMs: 100 });
    const conversation = `p:chat:${randomUUID()}`;
    const data = { conversationId: conversation, persona: 'p', kind: 'user' as const };
    const id = randomUUID();
    workers.expect(id);
    await jobs.boss.send(QUEUES.turn, data, { id, singletonKey: conversation });
    workers.announce(conversation, id, data);
    await until(() => started.length === 1, 3000);
    // Not taken yet (still waiting in the queue): a heartbeat now would find it not held and stop the turn.
    await new Promise((r) => setTimeout(r, 400));
    expect(started[0].job.signal?.aborted).toBe(false);
    await db.database.sql`update pgboss.job set state = 'active', started_on = now(), heartbeat_on = now() - interval '1 minute' where id = ${id}::uuid`;
    started[0].job.claim!.taken = true;
    await until(async () => new Date((await state(id)).heartbeat_on).getTime() > Date.now() - 30_000, 3000);
    expect(started[0].job.signal?.aborted).toBe(false);
    started[0].end();
  });

  it('keep a running job alive, and stop its turn once the queue has taken the job back', async () => {
    const { runner, started } = heldRunner();
    workers = await startTurnWorkers(jobs, db.database.sql, runner, { concurrency: 2, pollSeconds: 60, log, heartbeatMs: 100 });
    const id = await enqueue(`p:chat:${randomUUID()}`);
    await until(() => started.length === 1, 5000);
    const first = await state(id!);
    await until(async () => new Date((await state(id!)).heartbeat_on).getTime() > new Date(first.heartbeat_on).getTime(), 3000);
    let aborted = false;
    started[0].job.signal!.addEventListener('abort', () => (aborted = true));
    // Taken back (as the supervisor does to a job whose heartbeat stopped): the turn is told within a heartbeat.
    await jobs.boss.fail(QUEUES.turn, id!, { message: 'taken back' });
    await until(() => aborted, 3000);
  });

  it('give the jobs still running back to the queue at shutdown, to run again', async () => {
    const { runner, started } = heldRunner();
    const running = await startTurnWorkers(jobs, db.database.sql, runner, { concurrency: 2, pollSeconds: 60, log });
    const id = await enqueue(`p:chat:${randomUUID()}`);
    await until(() => started.length === 1, 5000);
    await running.stop(100);
    expect((await state(id!)).state).toBe('retry');
  });
});
