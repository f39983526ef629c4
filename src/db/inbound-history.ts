import { and, desc, eq, gt, isNotNull, max } from 'drizzle-orm';
import type { Persona } from '#src/config/persona.ts';
import type { InboundHistory } from '#src/connector.ts';
import type { Queryable } from './client.ts';
import { conversations, inboundEvents } from './schema.ts';

/**
 * What the database knows of one connector's past events (see InboundHistory); `configured` is where the personas
 * hear people on it.
 */
export function createInboundHistory(db: Queryable, connector: string, configured: InboundHistory['configured']): InboundHistory {
  return {
    configured,
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

/** Where the personas hear people on `connector` by configuration: their channels, and who may write to them directly. */
export function configuredFor(personas: readonly Persona[], connector: string): ReturnType<InboundHistory['configured']> {
  const chats = new Map<string, { chat: string; thread?: string }>();
  const people = new Set<string>();
  const prefix = `${connector}:`;
  for (const persona of personas) {
    for (const c of persona.channels) if (c.connector === connector) chats.set(`${c.chat}\0${c.thread ?? ''}`, { chat: c.chat, ...(c.thread ? { thread: c.thread } : {}) });
    for (const user of persona.users) if (user.startsWith(prefix)) people.add(user.slice(prefix.length));
  }
  return { chats: [...chats.values()], people: [...people] };
}
