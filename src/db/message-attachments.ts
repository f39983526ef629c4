import { sql } from 'drizzle-orm';
import type { ChatMessage } from '#src/llm/types.ts';
import type { Queryable } from './client.ts';

// Download state lives in the message itself (`content.attachments[i]`): the entry of a file being fetched carries
// `download: 'pending'`, a `downloadId` of its own and the database session of the process fetching it. A message
// read mid-turn is moved to a new row id (see claimArrivedMessages), so rows are found by that id, not by theirs.

/** Messages of a conversation, claimed by `turnId` or still waiting for a turn, with a download in progress. */
export async function messagesWithPendingDownloads(db: Queryable, conversationId: string, turnId: string): Promise<{ id: number; content: ChatMessage }[]> {
  const rows = (await db.execute(sql`
    select id, content from messages
    where conversation_id = ${conversationId}
      and (turn_id = ${turnId} or turn_id is null)
      and content->'attachments' @> '[{"download": "pending"}]'
    order by id`)) as unknown as { id: number | string; content: ChatMessage }[];
  return rows.map((r) => ({ id: Number(r.id), content: r.content }));
}

/**
 * Locks the message holding the download `downloadId` (inside the caller's transaction) and returns it; undefined
 * when no message holds it any more.
 */
export async function lockMessageWithDownload(tx: Queryable, conversationId: string, downloadId: string): Promise<{ id: number; content: ChatMessage } | undefined> {
  const rows = (await tx.execute(sql`
    select id, content from messages
    where conversation_id = ${conversationId}
      and content->'attachments' @> ${JSON.stringify([{ downloadId }])}::jsonb
    order by id desc
    limit 1
    for update`)) as unknown as { id: number | string; content: ChatMessage }[];
  return rows[0] && { id: Number(rows[0].id), content: rows[0].content };
}

/** Locks a message by id (inside the caller's transaction). */
export async function lockMessage(tx: Queryable, id: number): Promise<ChatMessage | undefined> {
  const rows = (await tx.execute(sql`select content from messages where id = ${id} for update`)) as unknown as { content: ChatMessage }[];
  return rows[0]?.content;
}

export async function replaceMessageContent(tx: Queryable, id: number, content: ChatMessage): Promise<void> {
  await tx.execute(sql`update messages set content = ${JSON.stringify(content)}::jsonb where id = ${id}`);
}

/** Which of these database sessions (application names) are still connected. */
export async function liveSessions(db: Queryable, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const rows = (await db.execute(sql`
    select distinct application_name as name from pg_stat_activity
    where application_name in (${sql.join(names.map((n) => sql`${n}`), sql`, `)})`)) as unknown as { name: string }[];
  return new Set(rows.map((r) => r.name));
}
