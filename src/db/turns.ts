import { and, desc, eq, sql } from 'drizzle-orm';
import type postgres from 'postgres';
import type { ChatMessage } from '#src/llm/types.ts';
import { clientOf, type Queryable } from './client.ts';
import type { HistoryRead } from './messages.ts';
import { turns } from './schema.ts';
import { LIVE_SESSIONS } from './sessions.ts';
import { USER_MODEL_LIMIT } from './user-models.ts';
import { QUEUES } from '#src/jobs/queues.ts';

export type TurnRow = typeof turns.$inferSelect;

/**
 * Starts a user turn in one statement: the conversation read (created if need be), the messages waiting in it
 * claimed for the turn oldest first (a message another transaction holds is waited for, see claimPendingMessages), and
 * the turn recorded, unless nothing was waiting (an earlier turn read the message mid-run): then no turn is written
 * and `claimed` is empty. With `historyLimit`, the turn's history is read in the same statement, as historySince reads
 * it after the claim (the messages claimed among it); with `userModelOf`, the persona's model of that person too.
 */
export async function startUserTurn(
  db: Queryable | postgres.Sql,
  row: { id: string; conversationId: string; persona: string; connector?: string; chat?: string; thread?: string; jobId: string; claimedBy?: string; origin?: unknown },
  /**
   * `claimJob: 'with messages'`: the job is taken only while messages of its conversation wait to be read.
   * `relaxedCommit`: the statement is a transaction of its own, and its commit does not wait for the disk, as the
   * starts on the bookkeeping connections do (see Database.bookkeeping).
   */
  options: { historyLimit?: number; userModelOf?: string; claimJob?: boolean | 'with messages'; relaxedCommit?: boolean } = {},
): Promise<{
  /** With `claimJob`: false when the job could not be taken (another process has it, or it is not its conversation's next). */
  jobClaimed?: boolean;
  conversation: { historyAfterId: number; thinking: boolean; activeTools: string[] };
  claimed: { message: ChatMessage; externalId: string | null }[];
  history?: HistoryRead;
  /** The persona's model of `userModelOf`, as userModelOf() reads it, when asked for. */
  userModel?: { dimension: string; content: string; confidence: number; updatedAt: Date }[];
}> {
  // A postgres.js connection of its own, or one that another transaction's statements share (see inOneTrip).
  const client = typeof db === 'function' ? db : clientOf(db);
  const withHistory = options.historyLimit !== undefined;
  const withUserModel = options.userModelOf !== undefined;
  const claim = options.claimJob === true || options.claimJob === 'with messages';
  const [state] = await client<
    {
      job_claimed: boolean;
      history_after_id: number;
      thinking: boolean;
      active_tools: string[];
      claimed: { id: number; content: ChatMessage; external_id: string | null }[];
      summary: string | null;
      summary_through: number | null;
      history: { seq: number; content: ChatMessage }[] | null;
      user_model: { dimension: string; content: string; confidence: number; updated_at: string }[] | null;
    }[]
  >`
    with job as (${claim ? claimTurnJob(client, row.jobId, options.claimJob === 'with messages' ? row.conversationId : undefined) : client`select null::uuid as id where false`}
    ), go as (
      select ${!claim} or exists (select 1 from job) as ok
    ), existing as (
      -- Read, not written: the message's ingress marked the conversation active a moment ago.
      select history_after_id, thinking, active_tools from conversations where id = ${row.conversationId}
    ), created as (
      insert into conversations (id, persona, connector, chat, thread)
      select ${row.conversationId}, ${row.persona}, ${row.connector ?? null}, ${row.chat ?? null}, ${row.thread ?? null}
      where not exists (select 1 from existing) and (select ok from go)
      on conflict (id) do update set last_activity_at = now()
      returning history_after_id, thinking, active_tools
    ), conversation as (
      select * from existing union all select * from created
    ), picked as (
      select id from messages where conversation_id = ${row.conversationId} and turn_id is null and (select ok from go) order by id for update
    ), numbered as (
      -- Each takes its place in the transcript now, after whatever the turns before wrote meanwhile.
      select id, nextval('messages_id_seq') as seq from picked
    ), claimed as (
      update messages m set turn_id = ${row.id}, seq = numbered.seq from numbered where m.id = numbered.id
      returning m.id, m.content, m.external_id, m.seq
    ), turn as (
      insert into turns (id, conversation_id, kind, status, job_id, claimed_by, origin)
      select ${row.id}, ${row.conversationId}, 'user', 'running', ${row.jobId}, ${row.claimedBy ?? null}, ${row.origin === undefined ? null : JSON.stringify(row.origin)}::jsonb
      where exists (select 1 from claimed)
    ), s as (
      select summary, through_message_id from conversation_summaries, conversation
      where ${withHistory} and conversation_id = ${row.conversationId} and through_message_id > conversation.history_after_id
    ), history as (
      -- The statement sees the messages as they were before the claim: the claimed ones come from the claim itself.
      select seq, content from (
        select m.seq, m.content from messages m, conversation
        where ${withHistory} and m.conversation_id = ${row.conversationId} and m.turn_id is not null
          and m.seq > coalesce((select through_message_id from s), conversation.history_after_id)
        union all
        select seq, content from claimed where ${withHistory}
      ) h order by seq desc limit ${options.historyLimit ?? 0}
    )
    select (select ok from go) as job_claimed, history_after_id, thinking, active_tools,
      coalesce((select json_agg(json_build_object('id', id, 'content', content, 'external_id', external_id) order by id) from claimed), '[]'::json) as claimed,
      (select summary from s) as summary, (select through_message_id from s) as summary_through,
      (select json_agg(json_build_object('seq', seq, 'content', content) order by seq) from history) as history,
      (select json_agg(json_build_object('dimension', dimension, 'content', content, 'confidence', confidence, 'updated_at', updated_at)
          order by confidence desc, updated_at desc, dimension)
        from (select * from user_models where ${withUserModel} and persona = ${row.persona} and user_address = ${options.userModelOf ?? ''}
          order by confidence desc, updated_at desc, dimension limit ${USER_MODEL_LIMIT}) u) as user_model,
      -- For the rest of the transaction, which this statement is: its commit, when asked.
      ${options.relaxedCommit ? client`(select set_config('synchronous_commit', 'off', true))` : client`null`} as relaxed
    from conversation`;
  // Not taken: nothing was written (a conversation that is not there has no row to read either).
  if (claim && !state?.job_claimed) return { jobClaimed: false, conversation: { historyAfterId: 0, thinking: false, activeTools: [] }, claimed: [] };
  return {
    ...(claim ? { jobClaimed: true } : {}),
    conversation: { historyAfterId: Number(state.history_after_id), thinking: state.thinking, activeTools: state.active_tools },
    claimed: state.claimed.map((c) => ({ message: c.content, externalId: c.external_id })),
    ...(withHistory
      ? {
          history: {
            summary: state.summary !== null && state.summary_through !== null ? { summary: state.summary, throughMessageId: Number(state.summary_through) } : undefined,
            rows: (state.history ?? []).map((r) => ({ id: Number(r.seq), message: r.content })),
          },
        }
      : {}),
    ...(withUserModel
      ? { userModel: (state.user_model ?? []).map((r) => ({ dimension: r.dimension, content: r.content, confidence: r.confidence, updatedAt: new Date(r.updated_at) })) }
      : {}),
  };
}

/**
 * The turn job `jobId`, taken for this process as pg-boss's fetch takes a job (made active, its attempt counted from
 * its start), when it is still waiting and is its conversation's next: no other job of the conversation is running,
 * waiting to be retried or failed, and none waits from before it (the order of the queue's key_strict_fifo policy).
 * A job another process took first is locked or active already, and is left to it. With `withMessagesOf`, only while
 * messages of that conversation wait to be read (a start never takes a job with nothing to read).
 */
function claimTurnJob(client: postgres.Sql, jobId: string, withMessagesOf?: string) {
  return client`
      update pgboss.job j set state = 'active', started_on = pgboss.job_now(), heartbeat_on = pgboss.job_now(),
        retry_count = case when started_on is not null then retry_count + 1 else retry_count end
      where j.name = ${QUEUES.turn} and j.id = ${jobId}::uuid and j.state = 'created' and not j.blocked
        and j.start_after <= pgboss.job_now()
        -- Each on the queue's own index for it (job_i8, job_i10), as its fetch reads them.
        and not exists (
          select 1 from pgboss.job b
          where b.name = j.name and b.singleton_key = j.singleton_key and b.policy = 'key_strict_fifo' and b.state in ('active', 'retry', 'failed'))
        and not exists (
          select 1 from pgboss.job b
          where b.name = j.name and b.singleton_key = j.singleton_key and b.policy = 'key_strict_fifo' and b.state < 'active' and not b.blocked
            and b.start_after <= pgboss.job_now() and (b.created_on, b.id) < (j.created_on, j.id))
        and (${withMessagesOf === undefined} or exists (select 1 from messages where conversation_id = ${withMessagesOf ?? ''} and turn_id is null))
      returning j.id`;
}

export async function insertTurn(
  db: Queryable,
  row: { id: string; conversationId: string; kind: string; jobId?: string; claimedBy?: string; origin?: unknown },
): Promise<void> {
  // Every turn runs this and finishTurn: written for postgres.js directly (see clientOf).
  await clientOf(db)`
    insert into turns (id, conversation_id, kind, status, job_id, claimed_by, origin)
    values (${row.id}, ${row.conversationId}, ${row.kind}, 'running', ${row.jobId ?? null}, ${row.claimedBy ?? null}, ${row.origin === undefined ? null : JSON.stringify(row.origin)})`;
}

/** A turn whose job failed for good: recorded as failed unless it ended already. Returns it if it changed. */
export async function failTurnOfJob(db: Queryable, jobId: string, error: string): Promise<TurnRow | undefined> {
  const [row] = await db
    .update(turns)
    .set({ status: 'failed', error, endedAt: sql`now()` })
    .where(and(eq(turns.jobId, jobId), eq(turns.status, 'running')))
    .returning();
  return row;
}

/**
 * The turn of a job run again, now claimed by the session `claimedBy` (this process); undefined when it has none, and
 * 'held' when it is running in another process that is alive (its job was handed out again while it runs: a crash of
 * Postgres lost the job's claim), which keeps it.
 */
export async function claimTurnOfJob(db: Queryable, jobId: string, claimedBy: string): Promise<TurnRow | 'held' | undefined> {
  const [row] = await db
    .update(turns)
    .set({ claimedBy })
    .where(
      and(
        eq(turns.jobId, jobId),
        sql`not coalesce(${turns.status} = 'running' and ${turns.claimedBy} <> ${claimedBy} and ${turns.claimedBy} in ${LIVE_SESSIONS}, false)`,
      ),
    )
    .returning();
  if (row) return row;
  const [held] = await db.select({ id: turns.id }).from(turns).where(eq(turns.jobId, jobId));
  return held ? 'held' : undefined;
}

/**
 * Turn jobs held ('active') by a process that is gone: the turn they run is claimed by a session no longer connected
 * to the database. Each with the attempt it is at, to give back that attempt and no later one.
 */
export async function turnJobsOfGoneSessions(db: Queryable): Promise<{ id: string; retryCount: number }[]> {
  const rows = (await db.execute(sql`
    select j.id::text as id, j.retry_count from pgboss.job j join turns t on t.job_id = j.id::text
    where j.name = ${QUEUES.turn} and j.state = 'active' and t.status = 'running' and t.claimed_by is not null
      and t.claimed_by not in ${LIVE_SESSIONS}`)) as unknown as { id: string; retry_count: number }[];
  return rows.map((r) => ({ id: r.id, retryCount: Number(r.retry_count) }));
}

/** Whether a turn of the conversation is running in a live process (one that died holding it does not count). */
export async function turnRunningIn(db: Queryable, conversationId: string): Promise<boolean> {
  const rows = (await db.execute(sql`
    select 1 from turns where conversation_id = ${conversationId} and status = 'running' and claimed_by in ${LIVE_SESSIONS}
    limit 1`)) as unknown as unknown[];
  return rows.length > 0;
}

/** How a turn ended, as its record keeps it. */
export interface TurnEnd {
  status: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  modelCalls: number;
  summary?: string;
  error?: string;
  /**
   * The attempt of the turn's queue job that ends with it: where the end is written with a reply's sent mark, the job
   * is completed in the same statement (fenced to this attempt, as the queue's own completion is), one round trip less.
   */
  job?: { id: string; retryCount: number };
}

/** The SET of a turn's end: left out (undefined), a field keeps what it had. */
export function turnEndAssignments(client: postgres.Sql, end: TurnEnd) {
  return client`status = ${end.status}, input_tokens = ${end.inputTokens}, output_tokens = ${end.outputTokens},
      cache_read_tokens = coalesce(${end.cacheReadTokens ?? null}, cache_read_tokens),
      cache_write_tokens = coalesce(${end.cacheWriteTokens ?? null}, cache_write_tokens),
      model_calls = ${end.modelCalls}, summary = coalesce(${end.summary ?? null}, summary),
      error = coalesce(${end.error ?? null}, error), ended_at = now()`;
}

export async function finishTurn(db: Queryable, id: string, end: TurnEnd): Promise<void> {
  // Every turn runs this: written for postgres.js directly (see clientOf).
  const client = clientOf(db);
  await client`update turns set ${turnEndAssignments(client, end)} where id = ${id}`;
}

export async function runningTurn(db: Queryable, conversationId: string): Promise<TurnRow | undefined> {
  const [row] = await db
    .select()
    .from(turns)
    .where(and(eq(turns.conversationId, conversationId), eq(turns.status, 'running')))
    .orderBy(desc(turns.startedAt))
    .limit(1);
  return row;
}

export async function requestTurnCancel(db: Queryable, id: string): Promise<void> {
  await db.update(turns).set({ cancelRequested: true }).where(eq(turns.id, id));
}

export async function isTurnCancelRequested(db: Queryable, id: string): Promise<boolean> {
  const [row] = await db.select({ c: turns.cancelRequested }).from(turns).where(eq(turns.id, id));
  return row?.c ?? false;
}

export async function conversationUsage(
  db: Queryable,
  conversationId: string,
): Promise<{ turns: number; input: number; output: number; cacheRead: number }> {
  const [row] = await db
    .select({
      turns: sql<number>`count(*)::int`,
      input: sql<number>`coalesce(sum(${turns.inputTokens}), 0)::int`,
      output: sql<number>`coalesce(sum(${turns.outputTokens}), 0)::int`,
      cacheRead: sql<number>`coalesce(sum(${turns.cacheReadTokens}), 0)::int`,
    })
    .from(turns)
    .where(eq(turns.conversationId, conversationId));
  return row ?? { turns: 0, input: 0, output: 0, cacheRead: 0 };
}

/** Records the conversation's waiting messages as read by a turn that was stopped before it began. */
export async function setAsidePendingMessages(db: Queryable, conversationId: string): Promise<number> {
  const rows = (await db.execute(sql`
    with turn as (
      insert into turns (id, conversation_id, kind, status, summary, ended_at)
      select gen_random_uuid(), ${conversationId}, 'user', 'cancelled', 'stopped before it started', now()
      where exists (select 1 from messages where conversation_id = ${conversationId} and turn_id is null)
      returning id
    )
    update messages set turn_id = (select id from turn), seq = nextval('messages_id_seq')
    where id in (select id from messages where conversation_id = ${conversationId} and turn_id is null for update skip locked)
      and exists (select 1 from turn)
    returning id`)) as unknown as unknown[];
  return rows.length;
}

/** Turns left 'running' with no live job behind them (their process died, and the job was settled): failed. */
export async function failOrphanedTurns(db: Queryable, olderThanSeconds: number): Promise<number> {
  const rows = (await db.execute(sql`
    update turns set status = 'failed', error = 'the turn was lost with its process', ended_at = now()
    where status = 'running'
      and started_at < now() - make_interval(secs => ${olderThanSeconds})
      and not exists (
        select 1 from pgboss.job j
        where j.name = ${QUEUES.turn} and j.id::text = turns.job_id and j.state in ('created', 'retry', 'active')
      )
    returning id`)) as unknown as unknown[];
  return rows.length;
}
