import { and, eq, lt } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { conversationThreads } from './schema.ts';

/** Notes that a thread a connector opened for a reply belongs to the reply's conversation (the first one to open it wins). */
export async function recordConversationThread(
  db: Queryable,
  row: { connector: string; chat: string; thread: string; conversationId: string },
): Promise<void> {
  await db.insert(conversationThreads).values(row).onConflictDoNothing();
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
