import { randomUUID } from 'node:crypto';
import { PgBoss, fromDrizzle } from 'pg-boss';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { clientOf, type ConnectGate, type Database, type Queryable } from '#src/db/client.ts';
import { QUEUES } from './queues.ts';
import { insertTurnJob } from './turn-jobs.ts';
import { CHANNELS, notify, turnNotice } from '#src/db/channels.ts';
import type { TurnJobData } from '#src/turns.ts';

/** How soon a short job (a firing, a summary) held by a process that died is handed out again (pg-boss's least). */
const JOB_HEARTBEAT_SECONDS = 10;

export type Boss = PgBoss;

export interface JobSystem {
  boss: PgBoss;
  /**
   * Enqueues a turn (see insertTurnJob); with `tx`, inside that transaction (committed with what caused it). Workers
   * hear of it on the turn channel when it commits, instead of at their next poll. A job id enqueued before is not
   * enqueued again: null.
   */
  enqueueTurn(data: TurnJobData, tx?: Queryable, options?: { id?: string }): Promise<string | null>;
  /** Sends a job to another queue; with `tx`, inside that transaction. A job id sent twice is stored once. */
  send(queue: string, data: object, options: { tx?: Queryable; id?: string; startAfter?: Date; retentionSeconds?: number; group?: string }): Promise<string | null>;
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

/** At most this many of pg-boss's statement texts are named (its texts are few; the bound keeps a surprise finite). */
const NAMED_STATEMENTS = 200;

/**
 * pg-boss's statements with parameters go to the server as named statements, so each connection parses and plans
 * a text once instead of at every call: planning its fetch took about a millisecond each time, more than running it.
 * node-postgres prepares a name on each connection the first time it is used there, again after a reconnect; a
 * statement that fails (a plan that a schema change under it made stale) closes its connection, so the next one
 * prepares afresh. Postgres keeps choosing between a generic and a custom plan per statement, as it does unprepared.
 */
function nameStatements(boss: PgBoss) {
  const db = bossDb(boss);
  const execute = db.executeSql.bind(db);
  const names = new Map<string, string>();
  db.executeSql = (text, values, options) => {
    // Without values a text may hold several statements, which only the simple protocol runs: one with no `;` cannot.
    if (typeof text !== 'string' || !values || (!values.length && text.includes(';'))) return execute(text, values, options);
    let name = names.get(text);
    if (name === undefined && names.size < NAMED_STATEMENTS) names.set(text, (name = `pgboss_${names.size}`));
    return execute(name === undefined ? text : { name, text }, values, options);
  };
}

/**
 * Every statement of pg-boss asks the database's gate first (see Database.gate), as a new connection of Parlor's own
 * pools does: pg-boss's pool would otherwise reconnect for a process back from a long stop and take a job (a firing,
 * a subagent's step) that it could not run, when the others had fenced it meanwhile. While the process's last beat is
 * recent, the gate answers at once.
 */
function gateStatements(boss: PgBoss, gate: ConnectGate) {
  const db = bossDb(boss);
  const execute = db.executeSql.bind(db);
  db.executeSql = async (text, values, options) => {
    await gate.before?.();
    return execute(text, values, options);
  };
}

/** pg-boss's database, whose one entry point its statements go through. */
function bossDb(boss: PgBoss) {
  return boss.getDb() as unknown as { executeSql(text: string | { name: string; text: string }, values?: unknown[], options?: unknown): Promise<unknown> };
}

export async function startJobSystem(
  database: Database,
  log: Logger,
  options: { poolSize?: number } = {},
): Promise<JobSystem> {
  const boss = new PgBoss({
    connectionString: database.url,
    application_name: database.applicationName,
    max: options.poolSize ?? 10,
    // pg-boss's own connections fetch, complete and fail jobs and keep its books: a commit there does not wait for the
    // disk. A crash of Postgres loses at most its last moment, and never anything that a later ordinary commit (the
    // inbound message, the ledger row before a send, the sent mark) depends on: the WAL is flushed in order. A job
    // taken again after such a crash is a redelivery, which a turn already handles. Jobs are sent through Parlor's
    // own connections, whose commits wait.
    options: '-c synchronous_commit=off',
    schema: 'pgboss',
    // Schedules (cron, heartbeat) are looked at every few seconds, so an occurrence fires within seconds of its minute.
    cronMonitorIntervalSeconds: 5,
    cronWorkerIntervalSeconds: 2,
    // A turn whose process died (its job's heartbeat stopped) is noticed within seconds, not a minute, so it
    // carries on soon after the next start.
    superviseIntervalSeconds: 10,
    monitorIntervalSeconds: 10,
  });
  nameStatements(boss);
  gateStatements(boss, database.gate);
  boss.on('error', (err: Error) => log.error({ err }, 'job queue error'));
  boss.on('warning', (w: unknown) => log.warn({ warning: w }, 'job queue warning'));
  await boss.start();
  const existing = await boss.getQueue(QUEUES.turn);
  if (!existing) {
    await boss.createQueue(QUEUES.turn, {
      policy: 'key_strict_fifo',
      // A turn released at shutdown or lost with its process is retried in place; a handler never fails a job
      // otherwise (a failed job holds its key until maintenance releases it).
      retryLimit: 10,
      retryDelay: 1,
      retryBackoff: true,
      heartbeatSeconds: 30,
      expireInSeconds: 3 * 3600,
      deleteAfterSeconds: 24 * 3600,
    });
  }
  for (const name of [QUEUES.reminder, QUEUES.cron, QUEUES.subagentPush, QUEUES.conversationSummary]) {
    const queue = await boss.getQueue(name);
    if (!queue) {
      // A handler that fails (the database went away mid-firing) is retried; firing is idempotent. A job whose
      // process died holding it (its heartbeat stopped) is retried within seconds, not after it expires: a reminder
      // fetched by a process killed a moment later fired five minutes late.
      await boss.createQueue(name, {
        retryLimit: 20,
        retryDelay: 1,
        retryBackoff: true,
        retryDelayMax: 60,
        heartbeatSeconds: JOB_HEARTBEAT_SECONDS,
        expireInSeconds: 300,
        deleteAfterSeconds: 7 * 24 * 3600,
      });
    } else if (queue.heartbeatSeconds !== JOB_HEARTBEAT_SECONDS) {
      await boss.updateQueue(name, { heartbeatSeconds: JOB_HEARTBEAT_SECONDS });
    }
  }
  return {
    boss,
    async enqueueTurn(data, tx, sendOptions = {}) {
      const db = tx ?? database.db;
      const [row] = await insertTurnJob(clientOf(db), sendOptions.id ?? randomUUID(), data);
      const id: string | null = row?.id ?? null;
      // pg-boss's own queue notification would wake every idle worker of every process; this one names the
      // conversation, so a process running its turn fetches the job when that turn ends, not before.
      if (id) await notify(db, CHANNELS.turn, turnNotice(data.conversationId, id));
      return id;
    },
    send(queue, data, sendOptions) {
      return boss.send(queue, data, {
        ...(sendOptions.id ? { id: sendOptions.id } : {}),
        // With postgres.js underneath, dates travel as ISO strings.
        ...(sendOptions.startAfter ? { startAfter: sendOptions.startAfter.toISOString() } : {}),
        ...(sendOptions.retentionSeconds ? { retentionSeconds: sendOptions.retentionSeconds } : {}),
        ...(sendOptions.group ? { group: { id: sendOptions.group } } : {}),
        db: fromDrizzle((sendOptions.tx ?? database.db) as never, sql),
      });
    },
    stop: async ({ timeoutMs = 5000 } = {}) => {
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true });
    },
  };
}
