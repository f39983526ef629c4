import { and, asc, eq, inArray, lt, sql } from 'drizzle-orm';
import type { ChatMessage } from '#src/llm/types.ts';
import { QUEUES } from '#src/jobs/queues.ts';
import { turnEndAssignments, type TurnEnd } from './turns.ts';
import { clientOf, rowReader, type Queryable } from './client.ts';
import { conversationThreadInsert, type ConversationThread } from './conversation-threads.ts';
import { outboundMessages } from './schema.ts';
import { LIVE_SESSIONS, NOT_FENCED } from './sessions.ts';

export type OutboundRow = typeof outboundMessages.$inferSelect;
const readOutbound = rowReader(outboundMessages);

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
  /**
   * `reaction`: set the emoji in `text` on the message `replyTo` instead of sending a message. `draft`: a note of
   * the message a streamed reply is being written in (never sent from the ledger).
   */
  kind?: 'message' | 'reaction' | 'draft';
  /** The one person a group message concerns (see `OutboundMessage.privateTo`). */
  privateTo?: string;
  /**
   * The turn's message that this one says (its answer), for the transcript: written in the statement that writes the
   * ledger row, and only when it does, so the answer is stored and queued for sending in one commit.
   */
  transcript?: ChatMessage;
  /** How its turn ended, recorded with the sent mark once the platform has it (the turn's last word). */
  endsTurn?: TurnEnd;
}

/**
 * A message of a turn whose record is gone: Postgres lost the turn's start (committed asynchronously) in a crash, so
 * the messages it read wait to be read again. What it says is not written: its conversation's next turn answers them.
 */
export class TurnGone extends Error {
  override name = 'TurnGone';
}

/**
 * Writes a message to the ledger before it is sent; `claimedBy` is the session of the process that will send it.
 * Returns undefined when the dedupe key exists already: see `outboundByKey` for what became of that message.
 */
export async function insertOutbound(
  db: Queryable,
  row: OutboundDraft & { status: 'pending' | 'sending'; claimedBy?: string },
): Promise<OutboundRow | undefined> {
  const sending = row.status === 'sending';
  const claimedBy = sending ? (row.claimedBy ?? null) : null;
  const json = (value: unknown) => (value === undefined ? null : JSON.stringify(value));
  const said = row.transcript && row.conversationId ? row.transcript : undefined;
  // Every reply goes through here: written for postgres.js directly (see clientOf).
  const [inserted] = await clientOf(db)<Record<string, unknown>[]>`
    with turn as (
      select ${row.turnId ?? null}::uuid is null or exists (select 1 from turns where id = ${row.turnId ?? null}::uuid) as known
    ), open as (
      (select 1 from outbound_messages where connector = ${row.connector} and chat = ${row.chat} and status in ('pending', 'sending') limit 1)
      -- A fenced process (see sessions.ts) sends nothing: what it writes waits in the outbox for a live one.
      union all (select 1 from process_beats where session = ${claimedBy} and fenced_at is not null)
    ), written as (
      insert into outbound_messages
        (dedupe_key, turn_id, conversation_id, connector, chat, thread, reply_to, text, files, buttons, kind, private_to, status, claimed_at, claimed_by)
      select ${row.dedupeKey}, ${row.turnId ?? null}, ${row.conversationId ?? null}, ${row.connector}, ${row.chat}, ${row.thread ?? null},
        ${row.replyTo ?? null}, ${row.text}, ${json(row.files)}, ${json(row.buttons)}, ${row.kind ?? 'message'}, ${row.privateTo ?? null},
        -- Sent at once only when nothing of the chat is still open (by any process): else it waits its turn in the outbox.
        case when ${sending} and not exists (select 1 from open) then 'sending' else 'pending' end,
        case when ${sending} and not exists (select 1 from open) then now() end,
        case when not exists (select 1 from open) then ${claimedBy}::text end
      from turn where turn.known
      -- A message whose earlier attempt failed for good may be tried again; one sent or in flight may not.
      on conflict (dedupe_key) do update
        set status = excluded.status, claimed_at = excluded.claimed_at, claimed_by = excluded.claimed_by, error = null, text = excluded.text
        where outbound_messages.status = 'failed'
      returning *
    ), said as (
      insert into messages (conversation_id, turn_id, role, content)
      select ${row.conversationId ?? null}, ${row.turnId ?? null}, ${said?.role ?? 'assistant'}, ${json(said)}::jsonb
      from written where ${said !== undefined}
    )
    select turn.known as turn_known, written.* from turn left join written on true`;
  // Its turn's record written with the row, or not at all: the WAL is flushed in order, so a turn that is there now
  // stays there once this commits.
  if (!inserted.turn_known) throw new TurnGone(`turn ${row.turnId} is gone (its start was lost in a crash of the database); its messages wait for the next turn`);
  if (inserted.id === null) return undefined;
  return inserted && readOutbound(inserted);
}

/**
 * Records a message that went out some other way than through the ledger's own send (a streamed reply, whose draft
 * was edited into it): a rerun of its turn finds it sent and sends nothing.
 */
export async function recordSentOutbound(db: Queryable, row: OutboundDraft & { platformMessageIds: string[] }): Promise<void> {
  await db
    .insert(outboundMessages)
    .values({ ...row, status: 'sent', attempts: 1, sentAt: sql`now()` })
    .onConflictDoNothing();
}

/** Everything the ledger holds about a message, by its dedupe key. */
export async function outboundRowByKey(db: Queryable, dedupeKey: string): Promise<OutboundRow | undefined> {
  const [row] = await db.select().from(outboundMessages).where(eq(outboundMessages.dedupeKey, dedupeKey));
  return row;
}

/**
 * Takes a message over for sending: a pending one, or one left 'sending' by a process that is gone (the platform
 * never confirmed it, so it is sent again, once, by the taker). Undefined when it is not to be taken.
 */
export async function takeOverOutbound(db: Queryable, id: number, claimedBy: string): Promise<OutboundRow | undefined> {
  const [row] = await db
    .update(outboundMessages)
    .set({
      status: 'sending',
      claimedAt: sql`now()`,
      claimedBy,
      resends: sql`${outboundMessages.resends} + (case when ${outboundMessages.status} = 'sending' then 1 else 0 end)`,
    })
    .where(
      and(
        eq(outboundMessages.id, id),
        sql`(${outboundMessages.status} = 'pending' or (${outboundMessages.status} = 'sending' and (${outboundMessages.claimedBy} is null or ${outboundMessages.claimedBy} not in ${LIVE_SESSIONS})))`,
        NOT_FENCED(claimedBy),
      ),
    )
    .returning();
  return row;
}

/** Whether an earlier message of the row's chat is still open: then the row waits for it (see claimPendingOutbound). */
export async function waitsBehind(db: Queryable, row: { id: number; connector: string; chat: string }): Promise<boolean> {
  const rows = await clientOf(db)`select 1 from outbound_messages
    where connector = ${row.connector} and chat = ${row.chat} and id < ${row.id} and status in ('pending', 'sending') limit 1`;
  return rows.length > 0;
}

/** Hands a message this process claimed back to the outbox (for the process that runs its connector). */
export async function releaseOutbound(db: Queryable, id: number, claimedBy: string): Promise<void> {
  await db
    .update(outboundMessages)
    .set({ status: 'pending', claimedAt: null, claimedBy: null })
    .where(and(eq(outboundMessages.id, id), eq(outboundMessages.status, 'sending'), eq(outboundMessages.claimedBy, claimedBy)));
}

/** Whether a message is still 'sending' with a claimer that is gone (no session of it on the database). */
export async function outboundOrphaned(db: Queryable, id: number): Promise<boolean> {
  const rows = await db
    .select({ id: outboundMessages.id })
    .from(outboundMessages)
    .where(
      and(
        eq(outboundMessages.id, id),
        eq(outboundMessages.status, 'sending'),
        sql`(${outboundMessages.claimedBy} is null or ${outboundMessages.claimedBy} not in ${LIVE_SESSIONS})`,
      ),
    );
  return rows.length > 0;
}

/**
 * Records that the platform has the message; with `endsTurn`, its turn's end too, in the same statement, and the
 * turn's job completed when `endsTurn.job` names its attempt (true: it was, as the queue's completion would have).
 */
export async function markOutboundSent(
  db: Queryable,
  id: number,
  platformMessageIds: string[],
  attempts: number,
  endsTurn?: TurnEnd,
  /**
   * The thread the message landed in, now its conversation's (see recordConversationThread): recorded with the send,
   * so that once the turn has ended, what is posted in the thread already continues the conversation.
   */
  thread?: ConversationThread,
): Promise<{ jobCompleted: boolean }> {
  const client = clientOf(db);
  const sent = client`
    update outbound_messages set status = 'sent', platform_message_ids = ${JSON.stringify(platformMessageIds)}, attempts = ${attempts}, sent_at = now(), error = null
    where id = ${id}`;
  const threadRecorded = thread ? client`, thread as (${conversationThreadInsert(client, thread)})` : client``;
  if (!endsTurn) {
    if (thread) await client`with sent as (${sent} returning id)${threadRecorded} select 1`;
    else await sent;
    return { jobCompleted: false };
  }
  const ended = client`update turns set ${turnEndAssignments(client, endsTurn)} where id = (select turn_id from sent)`;
  const { job } = endsTurn;
  if (!job) {
    await client`with sent as (${sent} returning turn_id)${threadRecorded} ${ended}`;
    return { jobCompleted: false };
  }
  const [row] = await client<{ job_completed: boolean }[]>`
    with sent as (${sent} returning turn_id)${threadRecorded}, ended as (${ended}), completed as (
      -- As pg-boss completes a job it handed out: only while this attempt holds it.
      update pgboss.job set completed_on = pgboss.job_now(), state = 'completed'
      where name = ${QUEUES.turn} and id = ${job.id}::uuid and state = 'active' and retry_count = ${job.retryCount}
        and exists (select 1 from sent)
      returning 1
    )
    select exists (select 1 from completed) as job_completed`;
  return { jobCompleted: row?.job_completed === true };
}

export async function markOutboundFailed(db: Queryable, id: number, error: string, attempts: number): Promise<void> {
  await db.update(outboundMessages).set({ status: 'failed', error, attempts }).where(eq(outboundMessages.id, id));
}

/**
 * Takes pending messages for the connectors (and chats) this process serves; concurrent claimers get disjoint rows.
 * Only the oldest open message of each chat is taken: while one is being sent (by any process: a 429 can hold it for
 * seconds), the chat's next waits for it, so a chat's messages go out in order whichever process sends them.
 */
export async function claimPendingOutbound(
  db: Queryable,
  served: { connector: string; chats?: readonly string[] }[],
  claimedBy: string,
  limit = 20,
): Promise<OutboundRow[]> {
  if (served.length === 0) return [];
  const filters = served.map(({ connector, chats }) =>
    chats ? sql`(connector = ${connector} and chat in ${chats})` : sql`connector = ${connector}`,
  );
  const rows = await db
    .update(outboundMessages)
    .set({ status: 'sending', claimedAt: sql`now()`, claimedBy })
    .where(
      and(
        inArray(
          outboundMessages.id,
          sql`(select id from outbound_messages o where status = 'pending' and (${sql.join(filters, sql` or `)})
            and not exists (select 1 from outbound_messages e where e.connector = o.connector and e.chat = o.chat and e.id < o.id and e.status in ('pending', 'sending'))
            order by id limit ${limit} for update skip locked)`,
        ),
        NOT_FENCED(claimedBy),
      ),
    )
    .returning();
  return rows.sort((a, b) => a.id - b.id);
}

/** Messages left 'sending' by a process that is gone (it died between claiming and the platform's answer). */
export async function orphanedOutboundIds(db: Queryable): Promise<number[]> {
  const rows = await db
    .select({ id: outboundMessages.id })
    .from(outboundMessages)
    .where(and(eq(outboundMessages.status, 'sending'), sql`(${outboundMessages.claimedBy} is null or ${outboundMessages.claimedBy} not in ${LIVE_SESSIONS})`))
    .limit(500);
  return rows.map((r) => r.id);
}

/**
 * Puts messages whose sender died back in the outbox: the platform never confirmed them, so the process that runs
 * their connector sends them (once). A row whose claimer came back meanwhile is left alone.
 */
export async function requeueOrphanedOutbound(db: Queryable, ids: number[]): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await db
    .update(outboundMessages)
    .set({ status: 'pending', claimedAt: null, claimedBy: null, resends: sql`${outboundMessages.resends} + 1` })
    .where(
      and(
        inArray(outboundMessages.id, ids),
        eq(outboundMessages.status, 'sending'),
        sql`(${outboundMessages.claimedBy} is null or ${outboundMessages.claimedBy} not in ${LIVE_SESSIONS})`,
      ),
    )
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
        eq(outboundMessages.kind, 'message'),
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
): Promise<{ connector: string; chat: string; status: string; ids: string[]; sentAt?: Date } | undefined> {
  const [row] = await db
    .select({
      connector: outboundMessages.connector,
      chat: outboundMessages.chat,
      ids: outboundMessages.platformMessageIds,
      status: outboundMessages.status,
      sentAt: outboundMessages.sentAt,
    })
    .from(outboundMessages)
    .where(eq(outboundMessages.dedupeKey, dedupeKey));
  return (
    row && { connector: row.connector, chat: row.chat, status: row.status, ids: Array.isArray(row.ids) ? (row.ids as string[]) : [], sentAt: row.sentAt ?? undefined }
  );
}
