import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Delivery } from '#src/agent/delivery.ts';
import type { Persona } from '#src/config/persona.ts';
import type { Database } from '#src/db/client.ts';
import { pruneConversationThreads } from '#src/db/conversation-threads.ts';
import { pruneFreshCronConversations } from '#src/db/conversations.ts';
import { pruneInboundEvents } from '#src/db/inbound-events.ts';
import { pruneInboundFailures } from '#src/db/inbound-failures.ts';
import { orphanedOutboundIds, pruneOutbound, requeueOrphanedOutbound } from '#src/db/outbound-messages.ts';
import { pruneQuestions } from '#src/db/questions.ts';
import { pruneReminders } from '#src/db/reminders.ts';
import { fenceHungSessions, goneAtTwoPasses, pruneBeats } from '#src/db/sessions.ts';
import type { ProcessBeat } from './process-beat.ts';
import { failOrphanedTurns, failTurnOfJob, turnJobsOfGoneSessions } from '#src/db/turns.ts';
import { primaryTarget } from '#src/tools/targets.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES } from './queues.ts';
import { backgroundFailureWarning, type TurnJobData } from '#src/turns.ts';

const INBOUND_RETENTION_MS = 14 * 24 * 3600_000;
const OUTBOUND_RETENTION_MS = 30 * 24 * 3600_000;
/** A thread the bot opened stays part of its conversation this long (later, what is posted there starts a new one). */
const THREAD_RETENTION_MS = 90 * 24 * 3600_000;
/** A turn 'running' this long with no live job behind it was lost with its process. */
const LOST_TURN_SECONDS = 600;

/**
 * Housekeeping every process with workers runs (each step is safe to run twice):
 * - a turn job that failed for good would hold its conversation's queue key forever; it is recorded as failed,
 *   the user is told, and the job is deleted so the conversation moves on;
 * - a turn left 'running' with no live job behind it is marked failed (it would look busy forever);
 * - what a process that is gone left behind (seen gone at two passes in a row, so a database blip is not mistaken
 *   for a death): a message it left 'sending' goes back to the outbox (the platform never confirmed it, so it is sent
 *   again, once), and the job of a turn it was running goes back to the queue, which runs it again within seconds
 *   instead of once the job's heartbeat runs out (half a minute and more). This step has a timer of its own (every
 *   5 s, and once at the start), since a chat's later messages wait behind that message or turn. A process whose
 *   connections stay open but whose heartbeat stopped (see process-beat.ts) is fenced first, and so counts as gone;
 * - dedupe records, finished ledger rows, finished reminders, resolved questions and the throwaway conversations of
 *   `fresh` cron runs older than any redelivery are pruned.
 */
export function startMaintenance(deps: {
  database: Database;
  jobs: JobSystem;
  delivery: Delivery;
  personas: () => readonly Persona[];
  log: Logger;
  intervalMs?: number;
  /** How often what a gone process left (messages it was sending, turn jobs it held) is looked for. */
  goneSweepMs?: number;
  /** This process's heartbeat: while it is steady, processes that stopped beating are fenced. */
  beat?: ProcessBeat;
}) {
  const { db } = deps.database;
  let running: Promise<void> | undefined;
  /** Ledger rows whose sender is gone at two passes in a row. */
  const orphanedTwice = goneAtTwoPasses<number>();
  /** Turn job attempts whose process is gone at two passes in a row. */
  const heldByGoneTwice = goneAtTwoPasses<{ id: string; retryCount: number }>((job) => `${job.id}:${job.retryCount}`);

  async function releaseFailedTurnJobs() {
    const failed = (await db.execute(
      sql`select id, data from pgboss.job where name = ${QUEUES.turn} and state = 'failed' order by created_on limit 50`,
    )) as unknown as { id: string; data: TurnJobData }[];
    for (const job of failed) {
      const turn = await failTurnOfJob(db, job.id, 'the turn failed repeatedly and was given up');
      const { data } = job;
      const primary = primaryTarget(deps.personas().find((p) => p.name === data.persona));
      // Background work warns the primary chat; a user hears about their own request.
      const notice =
        data.kind !== 'user' && primary
          ? {
              target: primary,
              text: backgroundFailureWarning(data.persona, data.kind, 'it failed several times and was given up'),
            }
          : data.origin
            ? { target: data.origin, text: 'Sorry, I could not finish your last request: it failed several times. Please send it again.' }
            : undefined;
      if (notice) {
        await deps.delivery.deliver({
          dedupeKey: `job:${job.id}:gave-up`,
          turnId: turn?.id,
          conversationId: data.conversationId,
          connector: notice.target.connector,
          chat: notice.target.chat,
          thread: notice.target.thread,
          text: notice.text,
        });
      }
      await deps.jobs.boss.deleteJob(QUEUES.turn, job.id);
      deps.log.warn({ conversation: job.data.conversationId, job: job.id }, 'failed turn job released');
    }
  }

  async function requeueOrphans() {
    const requeued = await requeueOrphanedOutbound(db, orphanedTwice(await orphanedOutboundIds(db)));
    if (requeued) deps.log.warn({ count: requeued }, 'messages whose sender stopped before the platform confirmed them are sent again');
  }

  async function releaseTurnsOfGoneProcesses() {
    const gone = heldByGoneTwice(await turnJobsOfGoneSessions(db));
    if (gone.length === 0) return;
    // Fenced to the attempt seen: a job the queue handed out again meanwhile is left to its new holder.
    await deps.jobs.boss.fail(QUEUES.turn, gone, { message: 'the process running the turn is gone' });
    deps.log.warn({ count: gone.length }, 'turns whose process is gone are run again');
  }

  /** Processes that stopped beating with their connections open: fenced, so that what they held is handed on. */
  async function fenceHung() {
    const beat = deps.beat;
    if (!beat?.steady()) return;
    const seconds = beat.hungAfterMs / 1000;
    for (const { session, terminated } of await fenceHungSessions(deps.database.sql, deps.database.applicationName, seconds)) {
      deps.log.warn(
        { session, terminated },
        `a process stopped answering (no heartbeat for ${seconds} s) with its database connections open: it is fenced, and its work goes to the others`,
      );
    }
  }

  /** What processes that are gone left behind; each step on its own, so one that fails does not hold the other. */
  async function sweepGone() {
    for (const step of [fenceHung, requeueOrphans, releaseTurnsOfGoneProcesses]) {
      await step().catch((err: unknown) => deps.log.warn({ err }, 'maintenance step failed'));
    }
  }

  async function tick() {
    try {
      await releaseFailedTurnJobs();
      const orphans = await failOrphanedTurns(db, LOST_TURN_SECONDS);
      if (orphans) deps.log.warn({ count: orphans }, 'turns lost with their process marked failed');
      await pruneInboundEvents(db, new Date(Date.now() - INBOUND_RETENTION_MS));
      await pruneInboundFailures(db, new Date(Date.now() - INBOUND_RETENTION_MS));
      await pruneOutbound(db, new Date(Date.now() - OUTBOUND_RETENTION_MS));
      await pruneReminders(db, new Date(Date.now() - OUTBOUND_RETENTION_MS));
      await pruneQuestions(db, new Date(Date.now() - OUTBOUND_RETENTION_MS));
      await pruneFreshCronConversations(db, new Date(Date.now() - OUTBOUND_RETENTION_MS));
      await pruneConversationThreads(db, new Date(Date.now() - THREAD_RETENTION_MS));
      await pruneBeats(deps.database.sql);
    } catch (err) {
      deps.log.warn({ err }, 'maintenance step failed');
    }
  }

  const timer = setInterval(() => {
    running ??= tick().finally(() => (running = undefined));
  }, deps.intervalMs ?? 60_000);
  timer.unref();
  let sweeping: Promise<void> | undefined;
  const sweep = () => (sweeping ??= sweepGone().finally(() => (sweeping = undefined)));
  const sweepTimer = setInterval(sweep, deps.goneSweepMs ?? 5_000);
  sweepTimer.unref();
  // A process started after a crash sees at once what the crashed one left, and gives it back at its next pass.
  void sweep();
  return {
    /** Runs one pass of every step now (tests). */
    runOnce: async () => {
      await sweep();
      await (running ??= tick().finally(() => (running = undefined)));
    },
    async stop() {
      clearInterval(timer);
      clearInterval(sweepTimer);
      await Promise.all([running, sweeping]);
    },
  };
}
