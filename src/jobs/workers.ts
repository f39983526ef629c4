import type postgres from 'postgres';
import type { TurnRunner } from '#src/agent/turn-runner.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES } from './queues.ts';
import { CHANNELS, listen } from '#src/db/channels.ts';
import type { TurnJobData } from '#src/turns.ts';

export interface TurnWorkers {
  /** Stops fetching, gives running turns `graceMs` to finish, then releases the rest back to the queue. */
  stop(graceMs?: number): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs turn jobs in this process: `concurrency` pg-boss workers, so many conversations run at once while the
 * queue keeps one turn per conversation. When a turn job is enqueued anywhere, one idle worker here fetches at
 * once; the others keep to their slow poll (which also picks up retries and anything a notification missed).
 */
export async function startTurnWorkers(
  jobs: JobSystem,
  sql: postgres.Sql,
  runner: TurnRunner,
  options: { concurrency: number; pollSeconds?: number },
): Promise<TurnWorkers> {
  const idle = new Set<string>();
  let running = 0;
  for (let i = 0; i < options.concurrency; i++) {
    const state: { id?: string } = {};
    state.id = await jobs.boss.work<TurnJobData>(
      QUEUES.turn,
      { batchSize: 1, includeMetadata: true, pollingIntervalSeconds: options.pollSeconds ?? 2 },
      async ([job]) => {
        idle.delete(state.id!);
        running++;
        try {
          await runner.run({ id: job.id, data: job.data, retryCount: job.retryCount, signal: job.signal });
        } finally {
          running--;
          idle.add(state.id!);
          // Fetch again as soon as this job is completed: a job of the same conversation may be waiting for it.
          jobs.boss.notifyWorker(state.id!);
        }
      },
    );
    idle.add(state.id);
  }
  const wakeOne = () => {
    const [id] = idle;
    if (id === undefined) return;
    // Rotate, so the next notification wakes another worker while this one fetches.
    idle.delete(id);
    idle.add(id);
    jobs.boss.notifyWorker(id);
  };
  const listener = await listen(sql, CHANNELS.turn, wakeOne);
  return {
    async stop(graceMs = 2500) {
      await listener.unlisten().catch(() => {});
      await jobs.boss.offWork(QUEUES.turn, { wait: false });
      const graceEnd = Date.now() + graceMs;
      while (running > 0 && Date.now() < graceEnd) await sleep(50);
      runner.interruptAll();
      const end = Date.now() + 3000;
      while (running > 0 && Date.now() < end) await sleep(50);
    },
  };
}
