import { eq, sql } from 'drizzle-orm';
import { clientOf, rowReader, type Queryable } from './client.ts';
import { conversationSummaries } from './schema.ts';

export type ConversationSummaryRow = typeof conversationSummaries.$inferSelect;
const readSummary = rowReader(conversationSummaries);

export async function getConversationSummary(db: Queryable, conversationId: string): Promise<ConversationSummaryRow | undefined> {
  const [row] = await clientOf(db)<Record<string, unknown>[]>`select * from conversation_summaries where conversation_id = ${conversationId}`;
  return row && readSummary(row);
}

/**
 * Stores the summary of a conversation up to `throughMessageId`, unless a summary reaching as far or further is
 * there already, or `/new` has since started the conversation afresh after that point. Whether it was stored.
 */
export async function saveConversationSummary(
  db: Queryable,
  row: { conversationId: string; summary: string; throughMessageId: number },
): Promise<boolean> {
  const stored = (await db.execute(sql`
    insert into conversation_summaries (conversation_id, summary, through_message_id, updated_at)
    select ${row.conversationId}, ${row.summary}, ${row.throughMessageId}, now()
    where ${row.throughMessageId} > coalesce((select history_after_id from conversations where id = ${row.conversationId}), 0)
    on conflict (conversation_id) do update
      set summary = excluded.summary, through_message_id = excluded.through_message_id, updated_at = now()
      where conversation_summaries.through_message_id < excluded.through_message_id
    returning conversation_id`)) as unknown as unknown[];
  return stored.length > 0;
}

/** `/new`: the conversation starts afresh, without what was summarised of it. */
export async function clearConversationSummary(db: Queryable, conversationId: string): Promise<void> {
  await db.delete(conversationSummaries).where(eq(conversationSummaries.conversationId, conversationId));
}
