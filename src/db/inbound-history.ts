import { and, desc, eq, gt, isNotNull, max } from 'drizzle-orm';
import type { InboundHistory } from '#src/connector.ts';
import type { Queryable } from './client.ts';
import { conversations, inboundEvents } from './schema.ts';

/** What the database knows of one connector's past events (see InboundHistory). */
export function createInboundHistory(db: Queryable, connector: string): InboundHistory {
  return {
    async lastStoredAt() {
      const [row] = await db.select({ at: max(inboundEvents.receivedAt) }).from(inboundEvents).where(eq(inboundEvents.connector, connector));
      return row?.at ?? undefined;
    },
    async recentChats(since, limit) {
      const at = max(conversations.lastActivityAt);
      const rows = await db
        .select({ chat: conversations.chat, thread: conversations.thread })
        .from(conversations)
        .where(and(eq(conversations.connector, connector), gt(conversations.lastActivityAt, since), isNotNull(conversations.chat)))
        .groupBy(conversations.chat, conversations.thread)
        .orderBy(desc(at))
        .limit(limit);
      return rows.map((r) => ({ chat: r.chat!, ...(r.thread ? { thread: r.thread } : {}) }));
    },
  };
}
