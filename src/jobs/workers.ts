import type { TurnRunner } from '#src/agent/turn-runner.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES, type TurnJobData } from './queues.ts';

/** Runs turn jobs in this process. Many conversations at once; the queue keeps one turn per conversation. */
export async function startTurnWorker(jobs: JobSystem, runner: TurnRunner, options: { concurrency: number }): Promise<string> {
  return jobs.boss.work<TurnJobData>(
    QUEUES.turn,
    {
      batchSize: 1,
      includeMetadata: true,
      localConcurrency: options.concurrency,
      pollingIntervalSeconds: 0.5,
      // New jobs wake the worker through LISTEN/NOTIFY; polling is only the backstop.
      notifyPollingIntervalSeconds: 2,
    },
    async ([job]) => {
      await runner.run({ id: job.id, data: job.data, retryCount: job.retryCount });
    },
  );
}
