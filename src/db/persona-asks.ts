import { and, eq, sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { personaAsks } from './schema.ts';

export async function insertPersonaAsk(db: Queryable, row: { id: string; source: string; target: string }): Promise<void> {
  await db.insert(personaAsks).values(row);
}

/** The reply to a waiting ask, once it is there. */
export async function personaAskReply(db: Queryable, id: string): Promise<string | undefined> {
  const [row] = await db.select({ reply: personaAsks.reply }).from(personaAsks).where(and(eq(personaAsks.id, id), eq(personaAsks.status, 'answered')));
  return row?.reply ?? undefined;
}

/** Gives the reply to the asker if it still waits; false when it gave up (the reply goes elsewhere). */
export async function answerPersonaAsk(db: Queryable, id: string, reply: string): Promise<boolean> {
  const rows = await db
    .update(personaAsks)
    .set({ status: 'answered', reply, answeredAt: sql`now()` })
    .where(and(eq(personaAsks.id, id), eq(personaAsks.status, 'waiting')))
    .returning({ id: personaAsks.id });
  return rows.length > 0;
}

/** The asker stops waiting: the reply of an ask answered in the meantime, else undefined (it will go to the inbox). */
export async function abandonPersonaAsk(db: Queryable, id: string): Promise<string | undefined> {
  const abandoned = await db
    .update(personaAsks)
    .set({ status: 'abandoned' })
    .where(and(eq(personaAsks.id, id), eq(personaAsks.status, 'waiting')))
    .returning({ id: personaAsks.id });
  if (abandoned.length) return undefined;
  return personaAskReply(db, id);
}
