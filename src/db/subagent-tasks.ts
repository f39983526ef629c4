import { and, asc, desc, eq, inArray, isNull, sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { subagentTasks } from './schema.ts';

export type SubagentTaskRow = typeof subagentTasks.$inferSelect;
export type SubagentStatus = 'queued' | 'running' | 'ok' | 'failed' | 'cancelled' | 'timeout';
export const FINISHED: readonly SubagentStatus[] = ['ok', 'failed', 'cancelled', 'timeout'];

export async function insertSubagentTask(db: Queryable, row: typeof subagentTasks.$inferInsert): Promise<void> {
  await db.insert(subagentTasks).values(row);
}

export async function getSubagentTask(db: Queryable, handle: string): Promise<SubagentTaskRow | undefined> {
  const [row] = await db.select().from(subagentTasks).where(eq(subagentTasks.handle, handle));
  return row;
}

/** Tasks one turn started (its batch). */
export async function countTurnTasks(db: Queryable, parentTurnId: string): Promise<number> {
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(subagentTasks).where(eq(subagentTasks.parentTurnId, parentTurnId));
  return row?.n ?? 0;
}

/** The tasks a conversation started, newest first. */
export async function conversationTasks(db: Queryable, parentConversationId: string, limit = 20): Promise<SubagentTaskRow[]> {
  return db
    .select()
    .from(subagentTasks)
    .where(eq(subagentTasks.parentConversationId, parentConversationId))
    .orderBy(desc(subagentTasks.createdAt))
    .limit(limit);
}

/** Takes the persona's task lock for the transaction: its limits are counted under it, by one process at a time. */
export async function lockPersonaTasks(tx: Queryable, persona: string): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`subagents:${persona}`}))`);
}

/**
 * Starts as many of the persona's queued tasks as its limit allows: marked running here, their turns enqueued by
 * the caller in the same transaction. The persona's lock keeps two processes from passing the limit together.
 */
export async function startQueuedTasks(tx: Queryable, persona: string, running: number): Promise<SubagentTaskRow[]> {
  await lockPersonaTasks(tx, persona);
  const [busy] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(subagentTasks)
    .where(and(eq(subagentTasks.persona, persona), eq(subagentTasks.status, 'running')));
  const free = running - (busy?.n ?? 0);
  if (free <= 0) return [];
  const next = await tx
    .select({ handle: subagentTasks.handle })
    .from(subagentTasks)
    .where(and(eq(subagentTasks.persona, persona), eq(subagentTasks.status, 'queued')))
    .orderBy(asc(subagentTasks.createdAt))
    .limit(free);
  if (next.length === 0) return [];
  return tx
    .update(subagentTasks)
    .set({ status: 'running', startedAt: sql`now()` })
    .where(and(inArray(subagentTasks.handle, next.map((n) => n.handle)), eq(subagentTasks.status, 'queued')))
    .returning();
}

/** Records how a task ended, once: undefined when it had ended already. */
export async function finishSubagentTask(
  db: Queryable,
  handle: string,
  outcome: { status: SubagentStatus; result?: string; error?: string },
  from: readonly SubagentStatus[] = ['running'],
): Promise<SubagentTaskRow | undefined> {
  const [row] = await db
    .update(subagentTasks)
    .set({ status: outcome.status, result: outcome.result ?? null, error: outcome.error ?? null, finishedAt: sql`now()` })
    .where(and(eq(subagentTasks.handle, handle), inArray(subagentTasks.status, [...from])))
    .returning();
  return row;
}

/** Whether every task of the batch has ended. */
export async function batchFinished(db: Queryable, parentTurnId: string): Promise<boolean> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(subagentTasks)
    .where(and(eq(subagentTasks.parentTurnId, parentTurnId), inArray(subagentTasks.status, ['queued', 'running'])));
  return (row?.n ?? 0) === 0;
}

/** Takes the batch's ended tasks whose results have not gone to the parent yet (each is taken once). */
export async function claimUnpushed(tx: Queryable, parentTurnId: string): Promise<SubagentTaskRow[]> {
  return tx
    .update(subagentTasks)
    .set({ pushedAt: sql`now()` })
    .where(and(eq(subagentTasks.parentTurnId, parentTurnId), isNull(subagentTasks.pushedAt), inArray(subagentTasks.status, [...FINISHED])))
    .returning();
}

/** The conversation's tasks that have not ended. */
export async function openConversationTasks(db: Queryable, parentConversationId: string): Promise<SubagentTaskRow[]> {
  return db
    .select()
    .from(subagentTasks)
    .where(and(eq(subagentTasks.parentConversationId, parentConversationId), inArray(subagentTasks.status, ['queued', 'running'])));
}
