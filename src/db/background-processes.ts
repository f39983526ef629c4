import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { backgroundProcesses } from './schema.ts';
import { LIVE_SESSIONS } from './sessions.ts';

export type BackgroundProcessRow = typeof backgroundProcesses.$inferSelect;
export type BackgroundProcessState = 'running' | 'exited' | 'killed' | 'lost';

/** Takes the persona's lock for the transaction, so its limit is counted by one process at a time. */
export async function lockPersonaProcesses(tx: Queryable, persona: string): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`processes:${persona}`}))`);
}

export async function countRunningProcesses(db: Queryable, persona: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(backgroundProcesses)
    .where(and(eq(backgroundProcesses.persona, persona), eq(backgroundProcesses.state, 'running')));
  return row?.n ?? 0;
}

export async function insertBackgroundProcess(db: Queryable, row: typeof backgroundProcesses.$inferInsert): Promise<void> {
  await db.insert(backgroundProcesses).values(row);
}

export async function getBackgroundProcess(db: Queryable, id: string): Promise<BackgroundProcessRow | undefined> {
  const [row] = await db.select().from(backgroundProcesses).where(eq(backgroundProcesses.id, id));
  return row;
}

/** A conversation's processes not removed, newest first. */
export async function conversationProcesses(db: Queryable, conversationId: string, limit = 20): Promise<BackgroundProcessRow[]> {
  return db
    .select()
    .from(backgroundProcesses)
    .where(and(eq(backgroundProcesses.conversationId, conversationId), isNull(backgroundProcesses.removedAt)))
    .orderBy(desc(backgroundProcesses.startedAt))
    .limit(limit);
}

/** Records how a running process ended; the row, or undefined when it had ended already (its wake went then). */
export async function endBackgroundProcess(
  db: Queryable,
  id: string,
  end: { state: Exclude<BackgroundProcessState, 'running'>; exitStatus: string; tail: string },
): Promise<BackgroundProcessRow | undefined> {
  const [row] = await db
    .update(backgroundProcesses)
    .set({ ...end, endedAt: new Date() })
    .where(and(eq(backgroundProcesses.id, id), eq(backgroundProcesses.state, 'running')))
    .returning();
  return row;
}

export async function removeBackgroundProcess(db: Queryable, id: string): Promise<void> {
  await db.update(backgroundProcesses).set({ removedAt: new Date() }).where(eq(backgroundProcesses.id, id));
}

/** Running rows whose Parlor process is gone (a crash, a kill -9): marked lost here, once. */
export async function claimLostProcesses(db: Queryable): Promise<BackgroundProcessRow[]> {
  return db
    .update(backgroundProcesses)
    .set({ state: 'lost', exitStatus: 'lost', endedAt: new Date() })
    .where(and(eq(backgroundProcesses.state, 'running'), sql`${backgroundProcesses.owner} not in ${LIVE_SESSIONS}`))
    .returning();
}
