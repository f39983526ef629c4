// A place held for a user turn whose message is being stored: the turn's start goes out right behind the message's
// transaction, in the same write, and the turn runs from what that start answers, with no fetch. Over real pg-boss.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobNotClaimed, type BegunTurn, type TurnJob, type TurnRunner } from '../../src/agent/turn-runner.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { CHANNELS, turnNotice } from '../../src/db/channels.ts';
import type { TurnWorkers } from '../../src/jobs/workers.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startSettledWorkers } from '../support/fetch-counter.ts';
import { until } from '../support/until.ts';

let db: TestDatabase;
let jobs: JobSystem;
let workers: TurnWorkers | undefined;
const log = pino({ level: 'silent' });

beforeAll(async () => {
  db = await createTestDatabase();
  jobs = await startJobSystem(db.database, log);
});
const restores: (() => void)[] = [];
afterEach(async () => {
  await workers?.stop(0);
  workers = undefined;
  while (restores.length) restores.pop()!();
});
afterAll(async () => {
  await jobs?.stop();
  await db?.drop();
});

/**
 * A runner whose turns end when the test says so; a turn begun with its job not taken is not run, and one run to take
 * its job takes it from the queue first (as the real one).
 */
function heldRunner() {
  const started: { job: TurnJob; end: () => void }[] = [];
  const beginnings: { job: TurnJob; client: unknown }[] = [];
  const runner: TurnRunner = {
    run: async (job) => {
      if (job.begun && !(await job.begun).start.jobClaimed) throw new JobNotClaimed('not taken');
      if (!job.begun && job.claim && !job.claim.taken) {
        const taken = await db.database.sql`update pgboss.job set state = 'active', started_on = now() where id = ${job.id}::uuid and state = 'created' returning id`;
        if (taken.length === 0) throw new JobNotClaimed('not taken');
        job.claim.taken = true;
      }
      return new Promise<void>((resolve, reject) => {
        started.push({ job, end: resolve });
        job.signal?.addEventListener('abort', () => reject(new Error('released')), { once: true });
      });
    },
    cancel: () => false,
    interruptAll: () => {},
    interrupt: () => {},
    beginIn: (job, client) => {
      beginnings.push({ job, client });
      return Promise.resolve(begunTurn(true));
    },
  };
  return { runner, started, beginnings };
}

function begunTurn(jobClaimed: boolean): BegunTurn {
  return {
    turnId: randomUUID(),
    start: {
      jobClaimed,
      conversation: { historyAfterId: 0, thinking: false, activeTools: [] },
      claimed: jobClaimed ? [{ message: { role: 'user', content: 'hi' }, externalId: null }] : [],
    },
  };
}

/** Workers whose first fetch has ended (see startSettledWorkers), their fetch counter restored after the test. */
async function startedWorkers(runner: TurnRunner, concurrency: number, fetchEveryMs?: number) {
  const ready = await startSettledWorkers(jobs, db.database.sql, runner, { concurrency, log, ...(fetchEveryMs === undefined ? {} : { fetchEveryMs }) });
  restores.push(ready.fetches.restore);
  return ready;
}

const userTurn = (conversationId: string) => ({ conversationId, persona: 'p', kind: 'user' as const });

/** Workers with two places, and one of them held for job `id` of a new conversation, as the ingress holds it. */
async function heldPlace(runner: TurnRunner) {
  const ready = await startedWorkers(runner, 2);
  workers = ready.workers;
  const conversation = `p:chat:${randomUUID()}`;
  const id = randomUUID();
  workers.expect(id);
  const place = workers.hold(conversation, id, userTurn(conversation))!;
  return { fetches: ready.fetches, conversation, id, place };
}
/** Ends a turn the test's runner holds, and waits for its job to be completed. */
async function finish(turn: { end: () => void }, id: string) {
  turn.end();
  await until(async () => (await state(id)) === 'completed', 3000);
}
/** A user turn's job in the queue, waiting, as the ingress stores it. */
const sendJob = (conversationId: string, id: string) => jobs.boss.send(QUEUES.turn, userTurn(conversationId), { id, singletonKey: conversationId });
const state = async (id: string) => (await db.database.sql`select state from pgboss.job where id = ${id}`)[0]?.state as string | undefined;
/** The turn notifications every process hears, from now until stop(). */
function notices() {
  const heard: string[] = [];
  const listening = db.database.sql.listen(CHANNELS.turn, (payload) => heard.push(payload));
  return { heard, stop: async () => (await listening).unlisten() };
}

describe('a place held for a turn whose message is being stored', () => {
  it("runs the turn from what its start answered behind the message's transaction, with no fetch, its notification no news", async () => {
    const { runner, started, beginnings } = heldRunner();
    const { fetches, conversation, id, place } = await heldPlace(runner);
    expect(place).toBeDefined();
    // The ingress sends the start behind its transaction, on its connection.
    const begun = place.statement(db.database.sql);
    expect(beginnings).toEqual([{ job: { id, data: userTurn(conversation), claim: { taken: false } }, client: db.database.sql }]);
    await sendJob(conversation, id);
    await db.database.sql`update pgboss.job set state = 'active', started_on = now() where id = ${id}::uuid`;
    await db.database.sql`select pg_notify('parlor_turn', ${turnNotice(conversation, id)})`;
    place.run(begun);
    await until(() => started.length === 1, 3000);
    expect(started[0].job).toMatchObject({ id, retryCount: 0, begun, claim: { taken: false } });
    await new Promise((r) => setTimeout(r, 200));
    expect(fetches.count).toBe(0);
    expect(started).toHaveLength(1);
    await finish(started[0], id);
  });

  it('is a place taken: none past the concurrency, none for a conversation running here or a background turn; dropped, it is free again', async () => {
    const { runner } = heldRunner();
    workers = (await startedWorkers(runner, 1)).workers;
    const [a, b] = [`p:chat:${randomUUID()}`, `p:chat:${randomUUID()}`];
    const first = workers.hold(a, randomUUID(), userTurn(a));
    expect(first).toBeDefined();
    expect(workers.hold(b, randomUUID(), userTurn(b))).toBeUndefined();
    first!.drop();
    expect(workers.hold(b, randomUUID(), { conversationId: b, persona: 'p', kind: 'wake', prompt: 'x' })).toBeUndefined();
    const second = workers.hold(b, randomUUID(), userTurn(b));
    expect(second).toBeDefined();
    // Dropping twice frees nothing more.
    second!.drop();
    second!.drop();
    const third = workers.hold(a, randomUUID(), userTurn(a))!;
    expect(workers.hold(a, randomUUID(), userTurn(a))).toBeUndefined();
    third.drop();
  });

  it('keeps no place for a conversation whose turn runs here', async () => {
    const { runner, started } = heldRunner();
    workers = (await startedWorkers(runner, 4)).workers;
    const conversation = `p:chat:${randomUUID()}`;
    const place = workers.hold(conversation, randomUUID(), userTurn(conversation))!;
    place.run(Promise.resolve(begunTurn(true)));
    await until(() => started.length === 1, 3000);
    expect(workers.hold(conversation, randomUUID(), userTurn(conversation))).toBeUndefined();
    started[0].end();
    await until(() => workers!.hold(conversation, randomUUID(), userTurn(conversation)) !== undefined, 3000);
  });

  it('whose start could not take its job tells the other processes of it, and lets the queue hand it out as usual', async () => {
    const { runner, started } = heldRunner();
    const { fetches, conversation, id, place } = await heldPlace(runner);
    // Stored without a notification (the ingress sends none for a held place): told now that its start could not take it.
    await sendJob(conversation, id);
    const told = notices();
    place.run(Promise.resolve(begunTurn(false)));
    await until(() => told.heard.includes(turnNotice(conversation, id)), 3000);
    await told.stop();
    await until(() => started.length === 1, 3000);
    expect(fetches.count).toBeGreaterThanOrEqual(1);
    expect(started[0].job).toMatchObject({ id, retryCount: 0 });
    expect(started[0].job.begun).toBeUndefined();
    expect(await state(id)).toBe('active');
    await finish(started[0], id);
  });

  it('dropped, lets a job of its conversation stored meanwhile start at once, its start taking it', async () => {
    const { runner, started } = heldRunner();
    // No fetch comes for being due (see FETCH_AT_LEAST_EVERY_MS).
    const { workers: started2, fetches } = await startedWorkers(runner, 2, 60_000);
    workers = started2;
    const conversation = `p:chat:${randomUUID()}`;
    const place = workers.hold(conversation, randomUUID(), userTurn(conversation))!;
    // A second message of the conversation is stored meanwhile, by the usual way: its conversation counts as busy here.
    const next = randomUUID();
    workers.expect(next);
    await sendJob(conversation, next);
    workers.announce(conversation, next, userTurn(conversation));
    await new Promise((r) => setTimeout(r, 200));
    expect(started).toHaveLength(0);
    // The first stored nothing (a redelivery): its place goes, and the second starts now, not at the next poll (its
    // start taking it from the queue).
    place.drop();
    await until(() => started.length === 1, 3000);
    expect(started[0].job).toMatchObject({ id: next, claim: { taken: true } });
    expect(fetches.count).toBe(0);
    await finish(started[0], next);
  });

  /** A place the workers hold, run as they stop, with a start that took its job (`taken`) or could not. */
  async function runAsTheyStop(taken: boolean) {
    const { runner, started } = heldRunner();
    workers = (await startedWorkers(runner, 2)).workers;
    const conversation = `p:chat:${randomUUID()}`;
    const id = randomUUID();
    const place = workers.hold(conversation, id, userTurn(conversation))!;
    await sendJob(conversation, id);
    if (taken) await db.database.sql`update pgboss.job set state = 'active', started_on = now() where id = ${id}::uuid`;
    const told = notices();
    const stopping = workers.stop(0);
    place.run(Promise.resolve(begunTurn(taken)));
    await stopping;
    workers = undefined;
    expect(started).toHaveLength(0);
    return { notice: turnNotice(conversation, id), id, told };
  }

  it('run as the process stops, with a start that could not take its job, tells the other processes of it', async () => {
    const { notice, id, told } = await runAsTheyStop(false);
    await until(() => told.heard.includes(notice), 3000);
    await told.stop();
    expect(await state(id)).toBe('created');
    // Left for the next process: gone before the next test's workers start.
    await db.database.sql`delete from pgboss.job where id = ${id}::uuid`;
  });

  it('run as the process stops, does not start its turn, and gives a job its start took back to the queue', async () => {
    const { notice, id, told } = await runAsTheyStop(true);
    await until(async () => (await state(id)) === 'retry', 3000);
    await told.stop();
    // Given back to the queue, it is not announced as a waiting job: the queue hands it out again.
    expect(told.heard).not.toContain(notice);
  });

  // Each with workers of its own: a fetch that filled the free place leaves the workers holding no place until the
  // next fetch finds the queue empty (jobs may be waiting), which a second round in the same workers would race.
  it.each(['run', 'drop'] as const)('whose job a fetch here hands out while its start is under way runs that attempt once the start has let go (%s), once', async (end) => {
    const { runner, started } = heldRunner();
    const { conversation, id, place } = await heldPlace(runner);
    await sendJob(conversation, id);
    // Another job's notification makes the workers fetch: the queue hands out this one (it waits, and is first).
    workers!.announce(`p:chat:${randomUUID()}`, randomUUID());
    await until(async () => (await state(id)) === 'active', 3000);
    await new Promise((r) => setTimeout(r, 100));
    expect(started).toHaveLength(0);
    // Its start then finds it taken (or the message was not stored after all): the fetched attempt runs, once.
    if (end === 'run') place.run(Promise.resolve(begunTurn(false)));
    else place.drop();
    await until(() => started.length === 1, 3000);
    expect(started[0].job).toMatchObject({ id, retryCount: 0 });
    expect(started[0].job.claim).toBeUndefined();
    await finish(started.pop()!, id);
    expect(started).toHaveLength(0);
  });
});
