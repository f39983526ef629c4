import { PgBoss, fromDrizzle } from 'pg-boss';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { applicationName, type Queryable } from '#src/db/client.ts';
import { QUEUES, type TurnJobData } from './queues.ts';

export type Boss = PgBoss;

export interface JobSystem {
  boss: PgBoss;
  /** Enqueues a turn; with `tx`, inside that transaction (committed with the message that caused it). */
  enqueueTurn(data: TurnJobData, tx?: Queryable): Promise<string | null>;
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

export async function startJobSystem(databaseUrl: string, log: Logger, options: { poolSize?: number } = {}): Promise<JobSystem> {
  const boss = new PgBoss({
    connectionString: databaseUrl,
    application_name: applicationName,
    max: options.poolSize ?? 10,
    schema: 'pgboss',
    useListenNotify: true,
  });
  boss.on('error', (err: Error) => log.error({ err }, 'job queue error'));
  boss.on('warning', (w: unknown) => log.warn({ warning: w }, 'job queue warning'));
  await boss.start();
  const existing = await boss.getQueue(QUEUES.turn);
  if (!existing) {
    await boss.createQueue(QUEUES.turn, {
      policy: 'key_strict_fifo',
      notify: true,
      // A turn that dies with its process is retried; a handler never fails a job otherwise (it would hold the key).
      retryLimit: 5,
      retryDelay: 1,
      retryBackoff: true,
      heartbeatSeconds: 30,
      expireInSeconds: 3 * 3600,
      deleteAfterSeconds: 24 * 3600,
    });
  }
  return {
    boss,
    enqueueTurn: (data, tx) =>
      boss.send(QUEUES.turn, data as unknown as object, {
        singletonKey: data.conversationId,
        ...(tx ? { db: fromDrizzle(tx as never, sql) } : {}),
      }),
    stop: async ({ timeoutMs = 5000 } = {}) => {
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true });
    },
  };
}
