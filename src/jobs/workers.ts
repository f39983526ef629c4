import type postgres from 'postgres';
import type { TurnRunner } from '#src/agent/turn-runner.ts';
import { TURN_CHANNEL, type JobSystem } from './boss.ts';
import { QUEUES, type TurnJobData } from './queues.ts';

export interface TurnWorkers {
  stop(): Promise<void>;
}

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
  for (let i = 0; i < options.concurrency; i++) {
    const state: { id?: string } = {};
    state.id = await jobs.boss.work<TurnJobData>(
      QUEUES.turn,
      { batchSize: 1, includeMetadata: true, pollingIntervalSeconds: options.pollSeconds ?? 2 },
      async ([job]) => {
        idle.delete(state.id!);
        try {
          await runner.run({ id: job.id, data: job.data, retryCount: job.retryCount });
        } finally {
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
  const listener = await sql.listen(TURN_CHANNEL, wakeOne);
  return {
    async stop() {
      await listener.unlisten().catch(() => {});
      await jobs.boss.offWork(QUEUES.turn, { wait: false });
    },
  };
}
