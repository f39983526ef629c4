import { and, count, desc, eq, gt, inArray, sql } from 'drizzle-orm';
import type { ChatMessage } from '#src/llm/types.ts';
import { clientOf, type Queryable } from './client.ts';
import { messages } from './schema.ts';

export type MessageRow = typeof messages.$inferSelect;

export async function insertMessage(
  db: Queryable,
  row: { conversationId: string; turnId?: string | null; message: ChatMessage; sender?: string; externalId?: string },
): Promise<number> {
  // Every turn writes two or more: written for postgres.js directly (see clientOf).
  const [inserted] = await clientOf(db)<{ id: string }[]>`
    insert into messages (conversation_id, turn_id, role, content, sender, external_id)
    values (${row.conversationId}, ${row.turnId ?? null}, ${row.message.role}, ${JSON.stringify(row.message)}, ${row.sender ?? null}, ${row.externalId ?? null})
    returning id`;
  return Number(inserted.id);
}

/**
 * Claims the user messages waiting in a conversation for this turn, oldest first. A message held for a moment by
 * another transaction (its attachment's download writing where the file went) is waited for, not skipped: skipped,
 * it would wait for the conversation's next message. One turn runs per conversation, so nothing else claims them.
 */
export async function claimPendingMessages(
  db: Queryable,
  conversationId: string,
  turnId: string,
): Promise<{ message: ChatMessage; externalId: string | null }[]> {
  // Each takes its place in the transcript now (seq), after whatever the turns before wrote meanwhile.
  const rows = await clientOf(db)<{ id: string; content: ChatMessage; external_id: string | null }[]>`
    with picked as (select id from messages where conversation_id = ${conversationId} and turn_id is null order by id for update),
    numbered as (select id, nextval('messages_id_seq') as seq from picked)
    update messages m set turn_id = ${turnId}, seq = numbered.seq from numbered where m.id = numbered.id
    returning m.id, m.content, m.external_id`;
  return rows.sort((a, b) => Number(a.id) - Number(b.id)).map((r) => ({ message: r.content, externalId: r.external_id }));
}

/**
 * Claims messages that arrived while a turn was running. They are moved to new ids (in their order) so that
 * the transcript reads them after what the turn wrote before, never between a tool call and its result.
 */
export async function claimArrivedMessages(db: Queryable, conversationId: string, turnId: string): Promise<ChatMessage[]> {
  const rows = (await db.execute(sql`
    with arrived as (
      delete from messages
      where id in (select id from messages where conversation_id = ${conversationId} and turn_id is null order by id for update skip locked)
      returning *
    )
    insert into messages (conversation_id, turn_id, role, content, sender, external_id, created_at)
    select conversation_id, ${turnId}, role, content, sender, external_id, created_at from arrived order by id
    returning id, content`)) as unknown as { id: number | string; content: ChatMessage }[];
  return rows.sort((a, b) => Number(a.id) - Number(b.id)).map((r) => r.content);
}

/**
 * The newest messages of a conversation after position `afterId` (and up to `throughId`), in transcript order (their
 * `seq`: when written, or when a turn read them), with their position as `id`. Reads at most `limit` rows.
 */
export async function recentMessages(
  db: Queryable,
  conversationId: string,
  options: { afterId: number; limit: number; excludeTurn?: string; throughId?: number },
): Promise<{ id: number; message: ChatMessage }[]> {
  // Every turn reads its history: written for postgres.js directly (see clientOf).
  const rows = await clientOf(db)<{ seq: string; content: ChatMessage; turn_id: string | null }[]>`
    select seq, content, turn_id from messages
    where conversation_id = ${conversationId} and seq > ${options.afterId} and seq <= ${options.throughId ?? Number.MAX_SAFE_INTEGER}
      and turn_id is not null
    order by seq desc limit ${options.limit}`;
  return rows
    .filter((r) => !options.excludeTurn || r.turn_id !== options.excludeTurn)
    .reverse()
    .map((r) => ({ id: Number(r.seq), message: r.content }));
}

/** A conversation's stored history as one read gives it: its summary, when there is one, and messages oldest first. */
export interface HistoryRead {
  summary?: { summary: string; throughMessageId: number };
  rows: { id: number; message: ChatMessage }[];
}

/**
 * A turn's history in one statement: the conversation's summary when it reaches past `afterId` (a summary from before
 * /new is not this conversation's any more), and its newest `limit` messages after where that summary ends (or after
 * `afterId` without one), oldest first.
 */
export async function historySince(
  db: Queryable,
  conversationId: string,
  options: { afterId: number; limit: number },
): Promise<HistoryRead> {
  const rows = await clientOf(db)<{ seq: string | null; content: ChatMessage | null; summary: string | null; through: number | null }[]>`
    with s as (
      select summary, through_message_id from conversation_summaries
      where conversation_id = ${conversationId} and through_message_id > ${options.afterId}
    )
    select m.seq, m.content, s.summary, s.through_message_id as through
    from (select 1) as one
    left join s on true
    left join lateral (
      select seq, content from messages
      where conversation_id = ${conversationId} and seq > coalesce(s.through_message_id, ${options.afterId}) and turn_id is not null
      order by seq desc limit ${options.limit}
    ) m on true`;
  const first = rows[0];
  return {
    summary: first?.summary != null && first.through != null ? { summary: first.summary, throughMessageId: Number(first.through) } : undefined,
    rows: rows
      .filter((r) => r.seq !== null)
      .reverse()
      .map((r) => ({ id: Number(r.seq), message: r.content as ChatMessage })),
  };
}

/** A skipped background turn leaves no trace in the transcript. */
export async function deleteTurnMessages(db: Queryable, turnId: string): Promise<void> {
  await db.delete(messages).where(eq(messages.turnId, turnId));
}

export async function countMessages(db: Queryable, conversationId: string, afterId = 0): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(messages)
    .where(and(eq(messages.conversationId, conversationId), gt(messages.seq, afterId)));
  return row?.n ?? 0;
}

/** Who wrote the user messages a turn has read (`connector:user id` addresses), oldest first. */
export async function turnSenders(db: Queryable, turnId: string): Promise<string[]> {
  const rows = await db
    .select({ sender: messages.sender })
    .from(messages)
    .where(and(eq(messages.turnId, turnId), eq(messages.role, 'user'), sql`${messages.sender} like '%:%'`))
    .orderBy(messages.id);
  return [...new Set(rows.map((r) => r.sender!))];
}

/** The last `limit` messages of a conversation, oldest first, with when they were written and by whom. */
export async function transcript(
  db: Queryable,
  conversationId: string,
  limit: number,
): Promise<{ id: number; message: ChatMessage; sender: string | null; createdAt: Date }[]> {
  const rows = await db
    .select({ id: messages.id, content: messages.content, sender: messages.sender, createdAt: messages.createdAt })
    .from(messages)
    .where(eq(messages.conversationId, conversationId))
    .orderBy(desc(messages.seq))
    .limit(limit);
  return rows.reverse().map((r) => ({ id: r.id, message: r.content as ChatMessage, sender: r.sender, createdAt: r.createdAt }));
}

/** How many model answers a conversation holds (a task's steps so far). */
/** For each conversation: how many model steps it took, and the tool it ran last. One query for them all. */
export async function conversationActivity(db: Queryable, conversationIds: readonly string[]): Promise<Map<string, { steps: number; lastTool?: string }>> {
  if (conversationIds.length === 0) return new Map();
  const rows = await db
    .select({
      conversationId: messages.conversationId,
      steps: sql<number>`(count(*) filter (where ${messages.role} = 'assistant'))::int`,
      lastTool: sql<string | null>`(array_agg(${messages.content}->>'name' order by ${messages.id} desc) filter (where ${messages.role} = 'tool'))[1]`,
    })
    .from(messages)
    .where(inArray(messages.conversationId, [...conversationIds]))
    .groupBy(messages.conversationId);
  return new Map(rows.map((r) => [r.conversationId, { steps: r.steps, ...(r.lastTool ? { lastTool: r.lastTool } : {}) }]));
}
