// What the turn workers tell the queue about the jobs they hold: given back, completed (in batches), alive.
import type { Logger } from 'pino';
import type { Job } from 'pg-boss';
import { sleep } from '#src/retry.ts';
import type { TurnJobData } from '#src/turns.ts';
import { batched } from './batched.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES } from './queues.ts';

/** How often a running turn's job says it is alive, when the queue asks for heartbeats (pg-boss's own cadence). */
const HEARTBEAT_SHARE = 0.5;
/** How long the completion of a finished turn's job is tried again while the database is away. */
const COMPLETE_RETRY_MS = 20_000;

const attemptOf = (job: Job<TurnJobData>) => ({ id: job.id, retryCount: job.retryCount });

export function turnJobUpkeep(jobs: JobSystem, log: Logger, stopped: () => boolean) {
  const { boss } = jobs;
  return {
    /** Jobs handed back to the queue, which runs them again (after its retry delay); fenced to the attempts held here. */
    async giveBack(held: readonly Job<TurnJobData>[], why: string): Promise<void> {
      if (held.length === 0) return;
      await boss.fail(QUEUES.turn, held.map(attemptOf), { message: why }).catch((err: unknown) =>
        // Left active: their heartbeat stops, and the queue hands them out again.
        log.warn({ err, jobs: held.length }, 'turn jobs could not be given back to their queue'),
      );
    },

    /** Jobs that end while a completion is being written wait for it, then go together in the next. */
    completer: batched<Job<TurnJobData>>(async (batch) => {
      const attempts = batch.map(attemptOf);
      const deadline = Date.now() + COMPLETE_RETRY_MS;
      for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
        try {
          await boss.complete(QUEUES.turn, attempts);
          return;
        } catch (err) {
          // The turns are recorded as finished: a job left active is handed out again later and does nothing.
          if (stopped() || Date.now() > deadline) {
            log.warn({ err, jobs: attempts.length }, 'finished turn jobs could not be completed; the queue will hand them out again');
            return;
          }
          await sleep(wait);
        }
      }
    }),

    /**
     * Says the jobs `held()` names are alive, when the queue asks for heartbeats (every `everyMs`, else at pg-boss's
     * cadence); a job whose claim is gone (taken back by the queue) is stopped, as its result could not land. Returns
     * what stops it.
     */
    async heartbeat(held: () => { job: Job<TurnJobData>; controller: AbortController }[], stillHeld: (jobId: string) => boolean, everyMs?: number) {
      const heartbeatSeconds = (await boss.getQueue(QUEUES.turn))?.heartbeatSeconds ?? 0;
      if (heartbeatSeconds <= 0) return () => {};
      const timer = setInterval(() => {
        const alive = held();
        if (alive.length === 0) return;
        boss
          .touch(QUEUES.turn, alive.map((h) => attemptOf(h.job)))
          .then((touched) => {
            const settled = (touched as { settled?: string[] }).settled;
            if (!settled) return;
            const refreshed = new Set(settled);
            for (const h of alive) if (!refreshed.has(h.job.id) && stillHeld(h.job.id)) h.controller.abort(new Error(`job ${h.job.id} is no longer held by this process`));
          })
          .catch((err: unknown) => log.warn({ err }, 'turn jobs could not say they are alive'));
      }, everyMs ?? heartbeatSeconds * HEARTBEAT_SHARE * 1000);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
