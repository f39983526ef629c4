import { and, eq, lt } from 'drizzle-orm';
import type postgres from 'postgres';
import { clientOf, type Queryable } from './client.ts';
import { conversationThreads } from './schema.ts';

export interface ConversationThread {
  connector: string;
  chat: string;
  thread: string;
  conversationId: string;
}

/**
 * The statement that notes a thread as the conversation's (the first one to claim it wins): a statement of its own,
 * or a part of another (the sent mark records the thread a reply landed in, see markOutboundSent).
 */
export function conversationThreadInsert(client: postgres.Sql, row: ConversationThread) {
  return client`
    insert into conversation_threads (connector, chat, thread, conversation_id)
    values (${row.connector}, ${row.chat}, ${row.thread}, ${row.conversationId}) on conflict do nothing`;
}

/** Notes that a thread a connector opened for a reply belongs to the reply's conversation (the first one to open it wins). */
export async function recordConversationThread(db: Queryable, row: ConversationThread): Promise<void> {
  await conversationThreadInsert(clientOf(db), row);
}

/** The conversation a thread the bot opened belongs to, if it opened it. */
export async function conversationOfThread(db: Queryable, where: { connector: string; chat: string; thread: string }): Promise<string | undefined> {
  const [row] = await db
    .select({ conversationId: conversationThreads.conversationId })
    .from(conversationThreads)
    .where(and(eq(conversationThreads.connector, where.connector), eq(conversationThreads.chat, where.chat), eq(conversationThreads.thread, where.thread)));
  return row?.conversationId;
}

/** Forgets threads opened before `olderThan` (maintenance). */
export async function pruneConversationThreads(db: Queryable, olderThan: Date): Promise<void> {
  await db.delete(conversationThreads).where(lt(conversationThreads.createdAt, olderThan));
}
