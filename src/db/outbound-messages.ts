import { and, asc, eq, inArray, lt, sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { outboundMessages } from './schema.ts';

export type OutboundRow = typeof outboundMessages.$inferSelect;

/** A message to send. */
export interface OutboundDraft {
  /** At most one message goes out per key, whatever retries or redeliveries happen. */
  dedupeKey: string;
  turnId?: string;
  conversationId?: string;
  connector: string;
  chat: string;
  thread?: string;
  replyTo?: string;
  text: string;
  files?: string[];
  buttons?: { label: string; data: string }[][];
}

/**
 * Writes a message to the ledger before it is sent. Returns undefined when the dedupe key exists already:
 * that message was sent (or is being sent) by an earlier attempt and must not go out twice.
 */
export async function insertOutbound(
  db: Queryable,
  row: OutboundDraft & { status: 'pending' | 'sending' },
): Promise<OutboundRow | undefined> {
  const claimedAt = row.status === 'sending' ? sql`now()` : null;
  const [inserted] = await db
    .insert(outboundMessages)
    .values({ ...row, claimedAt })
    // A message whose earlier attempt failed for good may be tried again; one sent or in flight may not.
    .onConflictDoUpdate({
      target: outboundMessages.dedupeKey,
      set: { status: row.status, claimedAt, error: null, text: row.text },
      setWhere: sql`${outboundMessages.status} = 'failed'`,
    })
    .returning();
  return inserted;
}

export async function markOutboundSent(db: Queryable, id: number, platformMessageIds: string[], attempts: number): Promise<void> {
  await db
    .update(outboundMessages)
    .set({ status: 'sent', platformMessageIds, attempts, sentAt: sql`now()`, error: null })
    .where(eq(outboundMessages.id, id));
}

export async function markOutboundFailed(db: Queryable, id: number, error: string, attempts: number): Promise<void> {
  await db.update(outboundMessages).set({ status: 'failed', error, attempts }).where(eq(outboundMessages.id, id));
}

/** Takes pending messages for the connectors (and chats) this process serves; concurrent claimers get disjoint rows. */
export async function claimPendingOutbound(
  db: Queryable,
  served: { connector: string; chats?: readonly string[] }[],
  limit = 20,
): Promise<OutboundRow[]> {
  if (served.length === 0) return [];
  const filters = served.map(({ connector, chats }) =>
    chats ? sql`(connector = ${connector} and chat in ${chats})` : sql`connector = ${connector}`,
  );
  const rows = await db
    .update(outboundMessages)
    .set({ status: 'sending', claimedAt: sql`now()` })
    .where(
      inArray(
        outboundMessages.id,
        sql`(select id from outbound_messages where status = 'pending' and (${sql.join(filters, sql` or `)}) order by id limit ${limit} for update skip locked)`,
      ),
    )
    .returning();
  return rows.sort((a, b) => a.id - b.id);
}

/** Rows left 'sending' by a process that died mid-send: marked failed, so a later attempt may send them. */
export async function failStaleOutbound(db: Queryable, olderThanSeconds: number): Promise<number> {
  const rows = await db
    .update(outboundMessages)
    .set({ status: 'failed', error: 'the sending process stopped before it finished' })
    .where(and(eq(outboundMessages.status, 'sending'), sql`${outboundMessages.claimedAt} < now() - make_interval(secs => ${olderThanSeconds})`))
    .returning({ id: outboundMessages.id });
  return rows.length;
}

/** The ledger only needs to outlive redeliveries; old finished rows are dropped. */
export async function pruneOutbound(db: Queryable, olderThan: Date): Promise<void> {
  await db
    .delete(outboundMessages)
    .where(and(inArray(outboundMessages.status, ['sent', 'failed']), lt(outboundMessages.createdAt, olderThan)));
}

export async function outboundForTurn(db: Queryable, turnId: string): Promise<OutboundRow[]> {
  return db.select().from(outboundMessages).where(eq(outboundMessages.turnId, turnId)).orderBy(asc(outboundMessages.id));
}


/** The text of a message Parlor sent to a chat in the last `withinDays` days, by its platform message id. */
export async function sentMessageText(
  db: Queryable,
  where: { connector: string; chat: string; platformMessageId: string; withinDays: number },
): Promise<string | undefined> {
  const [row] = await db
    .select({ text: outboundMessages.text })
    .from(outboundMessages)
    .where(
      and(
        eq(outboundMessages.connector, where.connector),
        eq(outboundMessages.chat, where.chat),
        eq(outboundMessages.status, 'sent'),
        sql`${outboundMessages.createdAt} > now() - make_interval(days => ${where.withinDays})`,
        sql`${outboundMessages.platformMessageIds} ? ${where.platformMessageId}`,
      ),
    )
    .limit(1);
  return row?.text;
}

/** A message found by its dedupe key (a question's message, say): where it went, its state and platform ids. */
export async function outboundByKey(
  db: Queryable,
  dedupeKey: string,
): Promise<{ connector: string; chat: string; status: string; ids: string[] } | undefined> {
  const [row] = await db
    .select({ connector: outboundMessages.connector, chat: outboundMessages.chat, ids: outboundMessages.platformMessageIds, status: outboundMessages.status })
    .from(outboundMessages)
    .where(eq(outboundMessages.dedupeKey, dedupeKey));
  return row && { connector: row.connector, chat: row.chat, status: row.status, ids: Array.isArray(row.ids) ? (row.ids as string[]) : [] };
}
