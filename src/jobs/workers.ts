import type postgres from 'postgres';
import type { Logger } from 'pino';
import type { Job } from 'pg-boss';
import { JobNotClaimed, type BegunTurn, type TurnRunner } from '#src/agent/turn-runner.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES } from './queues.ts';
import { CHANNELS, listen, notify, readTurnNotice, turnNotice } from '#src/db/channels.ts';
import { sleep } from '#src/retry.ts';
import { turnJobUpkeep } from './turn-job-upkeep.ts';
import { fading } from './fading-set.ts';
import type { TurnJobData } from '#src/turns.ts';

export interface TurnWorkers {
  /**
   * This process is storing a turn job: its notification, which may come back before the commit is confirmed, is
   * not news (announce follows).
   */
  expect(jobId: string): void;
  /**
   * This process enqueued a turn job of the conversation and committed it: run at once when a place is free, its
   * turn's start taking it from the queue (no fetch), without waiting for the database to pass the notification back.
   */
  announce(conversationId: string, jobId: string, data?: TurnJobData): void;
  /**
   * This process is about to store a user turn's job: when a place is free for it now, the place is held and the
   * turn's start goes out right behind the transaction that stores it (`statement`), so that it begins in the same
   * round trip. `run` starts it with what its start answers; `drop` lets the place go (nothing was stored, or its
   * start found nothing to read). Undefined when no place is free, or jobs wait for one (they were first). The job
   * is stored without a notification (no other process need fetch it): when its start cannot take it, the workers
   * tell the other processes then.
   */
  hold(conversationId: string, jobId: string, data: TurnJobData): HeldPlace | undefined;
  /** Stops fetching, gives running turns `graceMs` to finish, then releases the rest back to the queue. */
  stop(graceMs?: number): Promise<void>;
}

export interface HeldPlace {
  statement(client: postgres.Sql): Promise<BegunTurn>;
  run(begun: Promise<BegunTurn>): void;
  drop(): void;
}

/**
 * Turns one process runs at once, unless PARLOR_TURN_CONCURRENCY (or the app's `workerConcurrency`) says otherwise.
 * A turn mostly waits for its model; more at once also lets a busy process share more statements between turns (one
 * fetch and one completion for several): 32 ran a burst of DMs ~20 % faster than 8, at the same memory.
 */
export const DEFAULT_TURN_CONCURRENCY = 32;
/** How often the workers look for turn jobs no notification told them of (retries, a missed notification). */
export const TURN_POLL_SECONDS = 2;

/**
 * While jobs wait in the queue, a freed place is filled once half the places are free, or after this long: one fetch
 * for several turns costs about what a fetch for one does, and a turn that waited in a queue waits a moment longer.
 */
const GATHER_MS = 20;
/**
 * A place freed while jobs wait goes to a user job this process stored (its turn's start takes it from the queue: one
 * statement, where a fetch is one for the job and another for its start), unless the workers have not fetched for this
 * long: then to a fetch, which takes the queue's oldest wherever they were stored. When that fetch hands out others'
 * (retries, wake turns, other processes' jobs), places go to fetches until they are through (see othersWaiting), so
 * that none waits long behind this process's own. Not a fetch at every place: it takes the jobs the starts of the
 * places filled just before it are about to take, and each such start is a statement for nothing.
 */
const FETCH_AT_LEAST_EVERY_MS = 500;
/** How many of the jobs it stored this process keeps in mind (see `stored`); the queue has them all. */
const STORED_MAX = 1000;

interface Held {
  job: Job<TurnJobData>;
  controller: AbortController;
  /** Run before it is taken from the queue (see TurnJob.claim): not said to be alive until it is this process's. */
  claim?: { taken: boolean };
  /** The same job, handed out by a fetch here while its start was under way (which then cannot take it). */
  fetched?: Job<TurnJobData>;
  /** Stored without a notification (see hold): the other processes are told of it if its start here cannot take it. */
  unannounced?: boolean;
  /** Started from what this process stored (see `stored`). */
  fromStored?: boolean;
}

/**
 * Runs turn jobs in this process, up to `concurrency` at once, while the queue keeps one turn per conversation. The
 * queue's statements are shared between turns: one fetch takes a job for every free place, and the jobs that end
 * while a completion is being written are completed together by the next one, so a busy process writes one statement
 * for several turns (a user turn that ends with its reply has its job completed with the reply's sent mark instead).
 * When a turn job is enqueued anywhere, every process hears of its conversation: a process with a free place fetches
 * at once, and one that is running that conversation fetches when its turn's job is completed.
 */
export async function startTurnWorkers(
  jobs: JobSystem,
  sql: postgres.Sql,
  runner: TurnRunner,
  options: { concurrency: number; pollSeconds?: number; log: Logger; heartbeatMs?: number; fetchEveryMs?: number },
): Promise<TurnWorkers> {
  const { boss } = jobs;
  const { log, concurrency, fetchEveryMs = FETCH_AT_LEAST_EVERY_MS } = options;
  const running = new Map<string, Held>();
  /** Conversations with a job announced while one of theirs was running here: fetched for when it is completed. */
  const announced = new Set<string>();
  let fetching: Promise<void> | undefined;
  let fetchAgain = false;
  /** The last fetch filled every free place, or a job was announced while none was free: more may be waiting. */
  let backlog = false;
  /**
   * A job this process stored is heard of twice, by its own ingress and by its notification, in either order: the
   * first fetches, the second is not news. Jobs heard of once are kept for a few seconds (two generations).
   */
  const heard = fading();
  const firstHeard = (jobId: string) => {
    if (heard.delete(jobId)) return false;
    heard.add(jobId);
    return true;
  };
  /** Jobs this process is storing (see expect), kept like `heard`: one whose store failed is forgotten. */
  const expected = fading();
  const forget = setInterval(() => {
    heard.age();
    expected.age();
  }, 5000);
  forget.unref();
  let stopped = false;
  let gathering: NodeJS.Timeout | undefined;
  const upkeep = turnJobUpkeep(jobs, log, () => stopped);
  const { giveBack, completer } = upkeep;
  /**
   * User jobs this process stored while it had no place for them, oldest first: a place that frees goes to one of
   * them (see FETCH_AT_LEAST_EVERY_MS). Only a hint: the queue holds them all, a fetch hands them out as usual, and one
   * taken meanwhile (by a fetch, or by another process) is not taken by its start, which then costs a fetch.
   */
  const stored = new Map<string, Job<TurnJobData>>();
  let lastFetch = 0;
  /**
   * The last fetch handed out jobs this process did not store (retries, wake turns, other processes' jobs): places go
   * to fetches, which take the queue's oldest, until one hands out only jobs it stored.
   */
  let othersWaiting = false;

  const runningKey = (key: string) => {
    for (const held of running.values()) if (held.job.data.conversationId === key) return true;
    return false;
  };

  function pump(): void {
    if (stopped) return;
    if (fetching) {
      fetchAgain = true;
      return;
    }
    const free = concurrency - running.size;
    if (free <= 0) {
      backlog = true;
      return;
    }
    lastFetch = Date.now();
    fetching = (async () => {
      try {
        const fetched = await boss.fetch<TurnJobData>(QUEUES.turn, { batchSize: free });
        backlog = fetched.length === free;
        // Fetched as the process began to stop: back to the queue, for the next process or start.
        if (stopped) await giveBack(fetched, 'stopping');
        else {
          othersWaiting = fetched.some((job) => !stored.has(job.id));
          // The queue has nothing more for this process: what it stored was taken, or waits behind a running turn
          // (fetched once that ends).
          if (!backlog) stored.clear();
          for (const job of fetched) {
            stored.delete(job.id);
            const pending = running.get(job.id);
            // Its start is under way here and will find it taken: this attempt runs in its place once that start ends.
            if (pending?.claim && !pending.claim.taken) pending.fetched = job;
            else start(job);
          }
        }
      } catch (err) {
        // The database away for a moment: the poll tries again.
        log.warn({ err }, 'turn jobs could not be fetched');
      }
    })().finally(() => {
      fetching = undefined;
      if (fetchAgain) {
        fetchAgain = false;
        pump();
      }
    });
  }

  /**
   * With `claim`, the job was not fetched: its turn's start takes it from the queue, or nothing runs. `held` is the
   * place kept for it while its start went out behind the transaction that stored it (`begun`).
   */
  function start(job: Job<TurnJobData>, claim = false, held: Held = place(job, claim), begun?: Promise<BegunTurn>): void {
    const { controller } = held;
    if (stopped) controller.abort('stopping');
    let notClaimed = false;
    void runner
      .run({
        id: job.id,
        data: job.data,
        retryCount: job.retryCount,
        signal: controller.signal,
        claim: held.claim,
        ...(begun ? { begun } : {}),
      })
      .then(
        // Completed with the reply's sent mark, or here (with others that end meanwhile).
        (outcome) => (outcome?.jobCompleted ? undefined : completer.add(job)),
        (err: unknown) => {
          // Taken by another process first, or not its conversation's next: the queue hands it out as usual.
          if (err instanceof JobNotClaimed) {
            notClaimed = true;
            // What this process stored is out of date (another process took its jobs): the queue knows.
            if (held.fromStored) stored.clear();
          } else return giveBack([job], err instanceof Error ? err.message : String(err));
        },
      )
      .finally(() => {
        // Unless a fetch here handed it out meanwhile (it runs here now).
        if (notClaimed && held.unannounced && !held.fetched) tellOthers(job);
        letGo(held, notClaimed);
      });
  }

  /**
   * A job stored without a notification, because its start was to take it here (see hold), that the start could not
   * take (another process runs its conversation, or an earlier job of it waits): the other processes hear of it now,
   * as they would have when it was stored. This process's listener knows it already.
   */
  function tellOthers(job: Job<TurnJobData>): void {
    notify(sql, CHANNELS.turn, turnNotice(job.data.conversationId, job.id)).catch((err: unknown) =>
      log.warn({ err, job: job.id }, 'a turn job could not be announced; the workers find it at their next poll'),
    );
  }

  /** A place whose turn has ended, or whose start did not take its job: a fetched attempt of the job runs in it. */
  function letGo(held: Held, fetch = false): void {
    const { fetched } = held;
    if (!fetched) return free(held.job, fetch);
    running.delete(held.job.id);
    if (stopped) void giveBack([fetched], 'stopping');
    else start(fetched);
  }

  /** A place is free again: a job of its conversation announced meanwhile, or one it could not take, is fetched. */
  function free(job: Job<TurnJobData>, fetch = false): void {
    running.delete(job.id);
    const waiting = announced.delete(job.data.conversationId);
    // Not after a start that could not take its job: the queue knows better than what this process stored.
    if (!fetch && !othersWaiting && (backlog || waiting) && Date.now() - lastFetch < fetchEveryMs && startStored()) return;
    if (backlog) refill();
    else if (waiting || fetch) pump();
  }

  /** The oldest job this process stored whose conversation runs no turn here, started by its turn's start taking it. */
  function startStored(): boolean {
    if (stopped || running.size >= concurrency) return false;
    for (const [id, job] of stored) {
      if (running.has(id)) {
        stored.delete(id);
        continue;
      }
      if (runningKey(job.data.conversationId)) continue;
      stored.delete(id);
      const held = place(job, true);
      held.fromStored = true;
      start(job, true, held);
      return true;
    }
    return false;
  }

  /** A place taken for a job: counted as running from now on. */
  function place(job: Job<TurnJobData>, claim: boolean): Held {
    const held: Held = { job, controller: new AbortController(), ...(claim ? { claim: { taken: false } } : {}) };
    running.set(job.id, held);
    return held;
  }

  /** No place is free for a job stored now, or jobs wait for one: such a job is announced, and waits its turn. */
  const mayStartNow = (conversationId: string) => !stopped && !backlog && !runningKey(conversationId) && running.size < concurrency;

  /** A job kept for a place that frees (the oldest forgotten past STORED_MAX). */
  function keepStored(job: Job<TurnJobData>): void {
    stored.set(job.id, job);
    if (stored.size > STORED_MAX) stored.delete(stored.keys().next().value!);
  }

  /** A place is free while jobs wait: fetched for at once when half the places are free, else a moment later. */
  function refill(): void {
    if (concurrency - running.size >= Math.ceil(concurrency / 2)) {
      clearTimeout(gathering);
      gathering = undefined;
      pump();
    } else {
      gathering ??= setTimeout(() => {
        gathering = undefined;
        pump();
      }, GATHER_MS);
    }
  }

  const stopHeartbeat = await upkeep.heartbeat(
    () => [...running.values()].filter((h) => !h.controller.signal.aborted && (h.claim?.taken ?? true)),
    (jobId) => running.has(jobId),
    options.heartbeatMs,
  );

  // The slow poll picks up retries and anything a notification missed.
  const poll = setInterval(pump, (options.pollSeconds ?? TURN_POLL_SECONDS) * 1000);
  poll.unref();

  /** A job of this conversation was enqueued: fetched now, or when its running turn here ends. */
  const announce = (conversationId: string) => {
    if (conversationId && runningKey(conversationId)) announced.add(conversationId);
    else pump();
  };
  const listener = await listen(sql, CHANNELS.turn, (payload) => {
    const { conversationId, jobId } = readTurnNotice(payload);
    if (!jobId || (!expected.has(jobId) && firstHeard(jobId))) announce(conversationId);
  });
  pump();

  return {
    expect(jobId) {
      expected.add(jobId);
    },
    announce(conversationId, jobId, data) {
      const wasExpected = expected.delete(jobId);
      // Its notification, were it to come now, is not news.
      if (wasExpected) heard.add(jobId);
      else if (!firstHeard(jobId)) return;
      if (stopped) return;
      // Not while jobs wait for a place: they were there first, and the next fetch takes them in their order.
      if (!wasExpected || !data) return announce(conversationId);
      const job = { id: jobId, name: QUEUES.turn, data, retryCount: 0 } as Job<TurnJobData>;
      if (mayStartNow(conversationId)) return start(job, true);
      // A user turn's start can take its job (see TurnJob.claim): kept for a place that frees.
      if (data.kind === 'user') keepStored(job);
      announce(conversationId);
    },
    hold(conversationId, jobId, data) {
      if (data.kind !== 'user' || !mayStartNow(conversationId)) return undefined;
      const job = { id: jobId, name: QUEUES.turn, data, retryCount: 0 } as Job<TurnJobData>;
      const held = place(job, true);
      // Its message is stored without a notification: its start takes it here, or the other processes are told.
      held.unannounced = true;
      expected.add(jobId);
      let settled = false;
      return {
        statement: (client) => runner.beginIn({ id: jobId, data, claim: held.claim }, client),
        run(begun) {
          if (settled) return;
          settled = true;
          expected.delete(jobId);
          heard.add(jobId);
          if (!stopped) return start(job, true, held, begun);
          // Stopping: not started here. A job its start took goes back to the queue (its turn resumes elsewhere).
          letGo(held);
          void begun.then((b) => (b.start.jobClaimed ? giveBack([job], 'stopping') : tellOthers(job)), () => giveBack([job], 'stopping'));
        },
        drop() {
          if (settled) return;
          settled = true;
          expected.delete(jobId);
          letGo(held);
        },
      };
    },
    async stop(graceMs = 2500) {
      stopped = true;
      stored.clear();
      clearInterval(poll);
      clearInterval(forget);
      clearTimeout(gathering);
      await listener.unlisten().catch(() => {});
      await fetching;
      const graceEnd = Date.now() + graceMs;
      while (running.size > 0 && Date.now() < graceEnd) await sleep(50);
      runner.interruptAll();
      for (const held of running.values()) held.controller.abort('stopping');
      const end = Date.now() + 3000;
      while (running.size > 0 && Date.now() < end) await sleep(50);
      stopHeartbeat();
      await completer.idle();
      // A turn that did not let go (a tool that ignores its signal): its job goes back now rather than when its
      // heartbeat runs out; a completion it writes later no longer counts (the attempt is fenced).
      await giveBack([...running.values()].map((h) => h.job), 'stopped');
    },
  };
}
