// Counts pg-boss's fetches (and how many are in flight) until restore(): which of the workers' jobs came by a fetch.
import type { Logger } from 'pino';
import type postgres from 'postgres';
import type { PgBoss } from 'pg-boss';
import type { TurnRunner } from '../../src/agent/turn-runner.ts';
import type { JobSystem } from '../../src/jobs/boss.ts';
import { startTurnWorkers, type TurnWorkers } from '../../src/jobs/workers.ts';
import { until } from './until.ts';

export function countFetches(boss: PgBoss) {
  const original = boss.fetch.bind(boss);
  const counter = { count: 0, inFlight: 0, restore: () => void (boss.fetch = original) };
  boss.fetch = (async (...args: Parameters<typeof original>) => {
    counter.count++;
    counter.inFlight++;
    try {
      return await original(...args);
    } finally {
      counter.inFlight--;
    }
  }) as typeof original;
  return counter;
}

/**
 * Turn workers whose first fetch (at their start, finding nothing) has ended, so that it cannot take the jobs a test
 * sends next; with their fetches counted from then on (restore() when done).
 */
export async function startSettledWorkers(
  jobs: JobSystem,
  sql: postgres.Sql,
  runner: TurnRunner,
  options: { concurrency: number; heartbeatMs?: number; fetchEveryMs?: number; log: Logger },
): Promise<{ workers: TurnWorkers; fetches: ReturnType<typeof countFetches> }> {
  const fetches = countFetches(jobs.boss);
  const workers = await startTurnWorkers(jobs, sql, runner, { pollSeconds: 60, ...options });
  await until(() => fetches.count >= 1 && fetches.inFlight === 0, 5000);
  fetches.count = 0;
  return { workers, fetches };
}
