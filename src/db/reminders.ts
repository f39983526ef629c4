import { and, asc, eq, inArray, lt, ne, sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { reminders, schedulePauses } from './schema.ts';
import { QUEUES } from '#src/jobs/queues.ts';

export type ReminderRow = typeof reminders.$inferSelect;
export type NewReminder = typeof reminders.$inferInsert;

/** Unique per persona and name among pending reminders: a second one is refused by the database. */
export class DuplicateReminderName extends Error {
  override name = 'DuplicateReminderName';
}

export async function insertReminder(db: Queryable, row: NewReminder): Promise<ReminderRow> {
  try {
    const [inserted] = await db.insert(reminders).values(row).returning();
    return inserted;
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause ?? (err as { code?: string });
    if (cause?.code === '23505') throw new DuplicateReminderName(`a pending reminder named "${row.name}" exists already`);
    throw err;
  }
}

/** The reminder a tool call set (by its key, ToolContext.callKey), whatever became of it since. */
export async function reminderOfCall(db: Queryable, persona: string, callKey: string): Promise<ReminderRow | undefined> {
  const [row] = await db.select().from(reminders).where(and(eq(reminders.persona, persona), eq(reminders.callId, callKey))).limit(1);
  return row;
}

/** Holds the persona's reminders for the rest of the transaction: checks of how many it has, one at a time. */
export async function lockPersonaReminders(db: Queryable, persona: string): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(hashtext(${`parlor:reminders:${persona}`}))`);
}

/** Only the reminders one person set (`connector:user id`), when given. */
const setBy = (sender: string | undefined) => (sender === undefined ? undefined : sql`${reminders.origin}->>'sender' = ${sender}`);

/** How many reminders (wake-ups not counted) the persona has pending; with `sender`, of those that person set. */
export async function countPendingReminders(db: Queryable, persona: string, sender?: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(reminders)
    .where(and(eq(reminders.persona, persona), eq(reminders.kind, 'reminder'), eq(reminders.status, 'pending'), setBy(sender)));
  return row.n;
}

/** Cancels the pending reminder of this persona and name (with `sender`, only one that person set); returns it. */
export async function cancelReminder(db: Queryable, persona: string, name: string, sender?: string): Promise<ReminderRow | undefined> {
  const [row] = await db
    .update(reminders)
    .set({ status: 'cancelled' })
    .where(and(eq(reminders.persona, persona), eq(reminders.name, name), eq(reminders.status, 'pending'), setBy(sender)))
    .returning();
  return row;
}

/** The reminder, locked for the rest of the transaction (one firing at a time). */
export async function lockReminder(db: Queryable, id: string): Promise<ReminderRow | undefined> {
  const [row] = await db.select().from(reminders).where(eq(reminders.id, id)).for('update');
  return row;
}

export async function recordReminderFired(
  db: Queryable,
  id: string,
  next: { fires: number; dueAt: Date; status: 'pending' | 'done' },
): Promise<void> {
  await db
    .update(reminders)
    .set({ fires: next.fires, dueAt: next.dueAt, status: next.status, lastFiredAt: sql`now()` })
    .where(eq(reminders.id, id));
}

export async function pendingReminders(db: Queryable, persona: string, sender?: string): Promise<ReminderRow[]> {
  return db
    .select()
    .from(reminders)
    .where(and(eq(reminders.persona, persona), eq(reminders.status, 'pending'), setBy(sender)))
    .orderBy(asc(reminders.dueAt));
}

/** When the next pending reminder still ahead is due (of every persona). */
export async function nextDueTime(db: Queryable): Promise<Date | undefined> {
  const [row] = await db
    .select({ dueAt: reminders.dueAt })
    .from(reminders)
    .where(and(eq(reminders.status, 'pending'), sql`${reminders.dueAt} > now()`))
    .orderBy(asc(reminders.dueAt))
    .limit(1);
  return row?.dueAt;
}

export async function pauseSchedules(db: Queryable, persona: string, name: string): Promise<void> {
  await db.insert(schedulePauses).values({ persona, name }).onConflictDoNothing();
}

/** Releases one entry's pause; `*` releases every pause of the persona. Returns how many were released. */
export async function resumeSchedules(db: Queryable, persona: string, name: string): Promise<number> {
  const released = await db
    .delete(schedulePauses)
    .where(and(eq(schedulePauses.persona, persona), name === '*' ? sql`true` : eq(schedulePauses.name, name)))
    .returning();
  return released.length;
}

export async function pausedSchedules(db: Queryable, persona: string): Promise<string[]> {
  const rows = await db.select({ name: schedulePauses.name }).from(schedulePauses).where(eq(schedulePauses.persona, persona));
  return rows.map((r) => r.name);
}

export async function isSchedulePaused(db: Queryable, persona: string, name: string): Promise<boolean> {
  const rows = await db
    .select({ name: schedulePauses.name })
    .from(schedulePauses)
    .where(and(eq(schedulePauses.persona, persona), inArray(schedulePauses.name, ['*', name])))
    .limit(1);
  return rows.length > 0;
}

/** Forgets finished and cancelled reminders last touched before `olderThan`. */
export async function pruneReminders(db: Queryable, olderThan: Date): Promise<void> {
  await db
    .delete(reminders)
    .where(and(ne(reminders.status, 'pending'), lt(sql`coalesce(${reminders.lastFiredAt}, ${reminders.createdAt})`, olderThan.toISOString())));
}

/** Pending reminders overdue by more than `graceSeconds` with no live job to fire them (their job was lost). */
export async function strandedReminders(db: Queryable, graceSeconds: number): Promise<ReminderRow[]> {
  return db
    .select()
    .from(reminders)
    .where(
      and(
        eq(reminders.status, 'pending'),
        sql`${reminders.dueAt} < now() - make_interval(secs => ${graceSeconds})`,
        sql`not exists (select 1 from pgboss.job j where j.name = ${QUEUES.reminder} and j.data->>'reminderId' = ${reminders.id}::text and j.state in ('created', 'retry', 'active'))`,
      ),
    )
    .limit(100);
}
