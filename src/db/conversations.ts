import { desc, eq, sql } from 'drizzle-orm';
import { clientOf, type Queryable } from './client.ts';
import { conversations } from './schema.ts';
import { QUEUES } from '#src/jobs/queues.ts';
import { FRESH_CRON_PATTERN } from '#src/conversation-id.ts';

export type ConversationRow = typeof conversations.$inferSelect;

/** Creates the conversation or marks it active; returns what a turn needs to know of it. */
export async function ensureConversation(
  db: Queryable,
  row: { id: string; persona: string; connector?: string; chat?: string; thread?: string },
): Promise<{ historyAfterId: number; thinking: boolean; activeTools: string[] }> {
  // Every message and every turn runs this: written for postgres.js directly (see clientOf).
  const [state] = await clientOf(db)<{ history_after_id: number | string; thinking: boolean; active_tools: string[] }[]>`
    insert into conversations (id, persona, connector, chat, thread)
    values (${row.id}, ${row.persona}, ${row.connector ?? null}, ${row.chat ?? null}, ${row.thread ?? null})
    on conflict (id) do update set last_activity_at = now()
    returning history_after_id, thinking, active_tools`;
  return { historyAfterId: Number(state.history_after_id), thinking: state.thinking, activeTools: state.active_tools };
}

export async function getConversation(db: Queryable, id: string): Promise<ConversationRow | undefined> {
  const [row] = await db.select().from(conversations).where(eq(conversations.id, id));
  return row;
}

/** `/new`: later turns see only messages written after this point, and no tool activated before it. */
export async function resetConversationHistory(db: Queryable, id: string): Promise<void> {
  await db
    .update(conversations)
    .set({ historyAfterId: sql`(select coalesce(max(seq), 0) from messages where conversation_id = ${id})`, activeTools: sql`'{}'::text[]` })
    .where(eq(conversations.id, id));
}

/** The search-tier tools the conversation has activated (tool_activate), oldest first. */
export async function setConversationActiveTools(db: Queryable, id: string, names: readonly string[]): Promise<void> {
  await db.update(conversations).set({ activeTools: [...names] }).where(eq(conversations.id, id));
}

export async function setConversationThinking(db: Queryable, id: string, thinking: boolean): Promise<void> {
  await db.update(conversations).set({ thinking }).where(eq(conversations.id, id));
}

/** No message waits, no turn runs or is queued, and nothing waits to be sent in the conversation. */
export async function conversationIsIdle(db: Queryable, id: string): Promise<boolean> {
  const rows = (await db.execute(sql`
    select 1 from messages where conversation_id = ${id} and turn_id is null
    union all select 1 from turns where conversation_id = ${id} and status = 'running'
    union all select 1 from pgboss.job where name = ${QUEUES.turn} and singleton_key = ${id} and state in ('created', 'retry', 'active')
    union all select 1 from outbound_messages where conversation_id = ${id} and status in ('pending', 'sending')
    limit 1`)) as unknown as unknown[];
  return rows.length === 0;
}

/** Forgets the throwaway conversations of `fresh` cron runs (`<persona>:cron:<name>:<stamp>`) idle since `olderThan`. */
export async function pruneFreshCronConversations(db: Queryable, olderThan: Date): Promise<void> {
  await db
    .delete(conversations)
    .where(sql`${conversations.id} ~ ${FRESH_CRON_PATTERN} and ${conversations.lastActivityAt} < ${olderThan.toISOString()}`);
}

export interface ConversationSummary {
  id: string;
  persona: string;
  connector: string | null;
  chat: string | null;
  lastActivityAt: Date;
  messages: number;
  turns: number;
}

/** Conversations, most recently active first, with how many messages and turns each holds. */
export async function listConversations(db: Queryable, options: { persona?: string; limit: number }): Promise<ConversationSummary[]> {
  return db
    .select({
      id: conversations.id,
      persona: conversations.persona,
      connector: conversations.connector,
      chat: conversations.chat,
      lastActivityAt: conversations.lastActivityAt,
      messages: sql<number>`(select count(*)::int from messages m where m.conversation_id = conversations.id)`,
      turns: sql<number>`(select count(*)::int from turns t where t.conversation_id = conversations.id)`,
    })
    .from(conversations)
    .where(options.persona ? eq(conversations.persona, options.persona) : undefined)
    .orderBy(desc(conversations.lastActivityAt))
    .limit(options.limit);
}
