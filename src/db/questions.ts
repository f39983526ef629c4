import { and, desc, eq, gt, inArray, isNull, lte, ne, sql } from 'drizzle-orm';
import { clientOf, rowReader, type Queryable } from './client.ts';
import { questions, toolGrants } from './schema.ts';
import { LIVE_SESSIONS } from './sessions.ts';

export type QuestionRow = typeof questions.$inferSelect;
export type NewQuestion = typeof questions.$inferInsert;
export type QuestionAnswer = NonNullable<QuestionRow['answer']>;
const readQuestion = rowReader(questions);

export async function insertQuestion(db: Queryable, row: NewQuestion): Promise<QuestionRow> {
  const [inserted] = await db.insert(questions).values(row).returning();
  return inserted;
}

export async function getQuestion(db: Queryable, id: string): Promise<QuestionRow | undefined> {
  const [row] = await db.select().from(questions).where(eq(questions.id, id));
  return row;
}

/** Records the answer if the question is still open; undefined when it was answered or expired first. */
export async function answerQuestion(
  db: Queryable,
  id: string,
  answer: { answer: QuestionAnswer; answeredBy: string; answeredVia: string },
): Promise<QuestionRow | undefined> {
  const [row] = await db
    .update(questions)
    .set({ ...answer, status: 'answered', answeredAt: sql`now()` })
    .where(and(eq(questions.id, id), eq(questions.status, 'pending'), gt(questions.expiresAt, sql`now()`)))
    .returning();
  return row;
}

export async function expireQuestion(db: Queryable, id: string, reason: string): Promise<QuestionRow | undefined> {
  const [row] = await db
    .update(questions)
    .set({ status: 'expired', expiredReason: reason })
    .where(and(eq(questions.id, id), eq(questions.status, 'pending')))
    .returning();
  return row;
}

/** Expires a conversation's open questions with a reason. */
export async function expireConversationQuestions(db: Queryable, conversationId: string, reason: string): Promise<QuestionRow[]> {
  return db
    .update(questions)
    .set({ status: 'expired', expiredReason: reason })
    .where(and(eq(questions.conversationId, conversationId), eq(questions.status, 'pending')))
    .returning();
}

/** Expires open questions past their time. */
export async function expireDueQuestions(db: Queryable): Promise<QuestionRow[]> {
  return db
    .update(questions)
    .set({ status: 'expired', expiredReason: 'no answer in time' })
    .where(and(eq(questions.status, 'pending'), lte(questions.expiresAt, sql`now()`)))
    .returning();
}

/** Open questions whose waiting process has no session on the database (it stopped or crashed). */
export async function orphanedQuestionIds(db: Queryable): Promise<string[]> {
  const rows = await db
    .select({ id: questions.id })
    .from(questions)
    .where(
      and(
        eq(questions.status, 'pending'),
        sql`${questions.owner} is not null`,
        sql`${questions.owner} not in ${LIVE_SESSIONS}`,
      ),
    );
  return rows.map((r) => r.id);
}

export async function expireOrphans(db: Queryable, ids: string[]): Promise<QuestionRow[]> {
  if (ids.length === 0) return [];
  return db
    .update(questions)
    .set({ status: 'expired', expiredReason: 'Parlor restarted while it waited' })
    .where(
      and(
        inArray(questions.id, ids),
        eq(questions.status, 'pending'),
        sql`${questions.owner} not in ${LIVE_SESSIONS}`,
      ),
    )
    .returning();
}

/** Takes the job of updating a resolved question's chat message; only one process gets it. */
export async function claimQuestionClose(db: Queryable, id: string): Promise<QuestionRow | undefined> {
  const [row] = await db
    .update(questions)
    .set({ closedAt: sql`now()` })
    .where(and(eq(questions.id, id), ne(questions.status, 'pending'), isNull(questions.closedAt)))
    .returning();
  return row;
}

/** The message update failed: another attempt may take it. */
export async function reopenQuestionClose(db: Queryable, id: string): Promise<void> {
  await db.update(questions).set({ closedAt: null }).where(eq(questions.id, id));
}

/** Resolved questions whose chat message on these connectors (of one conversation) still shows its buttons, newest first. */
export async function unclosedQuestionIds(db: Queryable, connectors: string[], conversationId?: string): Promise<string[]> {
  if (connectors.length === 0) return [];
  const rows = await db
    .select({ id: questions.id })
    .from(questions)
    .where(
      and(
        ne(questions.status, 'pending'),
        isNull(questions.closedAt),
        inArray(questions.connector, connectors),
        conversationId === undefined ? undefined : eq(questions.conversationId, conversationId),
      ),
    )
    .orderBy(desc(questions.createdAt))
    .limit(100);
  return rows.map((r) => r.id);
}

export async function pendingQuestions(db: Queryable): Promise<QuestionRow[]> {
  return db
    .select()
    .from(questions)
    .where(and(eq(questions.status, 'pending'), gt(questions.expiresAt, sql`now()`)))
    .orderBy(questions.createdAt);
}

/** A chat (or thread) where a typed reply may answer a question; `conversationId`: see openQuestionInChat. */
export interface QuestionChat {
  connector: string;
  chat: string;
  thread?: string;
  conversationId?: string;
}

/** The condition on `questions` of those open in `chat`: openQuestionInChat's, and the ingress's (storeInboundMessage). */
export function openInChat(sql: ReturnType<typeof clientOf>, chat: QuestionChat) {
  return sql`status = 'pending' and connector = ${chat.connector} and chat = ${chat.chat} and expires_at > now()
    and (thread is not distinct from ${chat.thread ?? null}::text or conversation_id = ${chat.conversationId ?? null}::text)`;
}

/**
 * The newest open question shown in a chat (or thread). With `conversationId`, the thread is one the bot opened for
 * that conversation's replies: a question it asked there (threaded on the message it answers) counts too.
 */
export async function openQuestionInChat(db: Queryable, chat: QuestionChat): Promise<QuestionRow | undefined> {
  const client = clientOf(db);
  const [row] = await client<Record<string, unknown>[]>`select * from questions where ${openInChat(client, chat)} order by created_at desc limit 1`;
  return row && readQuestion(row);
}

export async function hasToolGrant(db: Queryable, grant: { persona: string; tool: string; scope: string }): Promise<boolean> {
  const rows = await db
    .select({ tool: toolGrants.tool })
    .from(toolGrants)
    .where(and(eq(toolGrants.persona, grant.persona), eq(toolGrants.tool, grant.tool), inArray(toolGrants.scope, ['*', grant.scope])))
    .limit(1);
  return rows.length > 0;
}

export async function insertToolGrant(
  db: Queryable,
  grant: { persona: string; tool: string; scope: string; grantedBy: string; questionId: string },
): Promise<void> {
  await db.insert(toolGrants).values(grant).onConflictDoNothing();
}

export async function hasPendingQuestion(db: Queryable, conversationId: string): Promise<boolean> {
  const rows = await db
    .select({ id: questions.id })
    .from(questions)
    .where(and(eq(questions.conversationId, conversationId), eq(questions.status, 'pending'), gt(questions.expiresAt, sql`now()`)))
    .limit(1);
  return rows.length > 0;
}

/** Forgets resolved questions older than `olderThan` whose messages are updated. */
export async function pruneQuestions(db: Queryable, olderThan: Date): Promise<void> {
  await db
    .delete(questions)
    .where(and(ne(questions.status, 'pending'), sql`${questions.closedAt} is not null`, lte(questions.createdAt, olderThan)));
}
