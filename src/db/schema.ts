import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  check,
  customType,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  real,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();

/** One persona conversation: a chat (or thread), an inbox, a cron or heartbeat stream, a subagent. */
export const conversations = pgTable('conversations', {
  id: text('id').primaryKey(),
  persona: text('persona').notNull(),
  connector: text('connector'),
  chat: text('chat'),
  thread: text('thread'),
  /** Messages with an id at or below this are not sent to the model (`/new`). */
  historyAfterId: integer('history_after_id').notNull().default(0),
  thinking: boolean('thinking').notNull().default(false),
  /** Search-tier tools (custom, MCP) tool_activate made callable here, oldest first; `/new` empties it. */
  activeTools: text('active_tools').array().notNull().default(sql`'{}'::text[]`),
  createdAt: createdAt(),
  lastActivityAt: timestamp('last_activity_at', { withTimezone: true }).notNull().defaultNow(),
});

/** The transcript. `content` is the plain message object sent to the model, stored as is. */
export const messages = pgTable(
  'messages',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    /** For a user message: the turn that read it (null while it waits). Otherwise the turn that wrote it. */
    turnId: uuid('turn_id'),
    role: text('role').notNull(),
    content: jsonb('content').notNull(),
    sender: text('sender'),
    externalId: text('external_id'),
    /**
     * Where the message stands in the transcript: when it was written, or, for a person's message, when a turn read
     * it (a message stored while the turn before was answering is read after that answer). From the ids' sequence.
     */
    seq: bigint('seq', { mode: 'number' })
      .notNull()
      .default(sql`nextval('messages_id_seq')`),
    createdAt: createdAt(),
  },
  (t) => [
    index('messages_conversation_idx').on(t.conversationId, t.id),
    index('messages_history_idx').on(t.conversationId, t.seq).where(sql`${t.turnId} is not null`),
    index('messages_pending_idx').on(t.conversationId, t.id).where(sql`${t.turnId} is null`),
    index('messages_turn_idx').on(t.turnId),
  ],
);

/** Platform events already accepted, so a redelivery is dropped. */
export const inboundEvents = pgTable(
  'inbound_events',
  {
    connector: text('connector').notNull(),
    externalId: text('external_id').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.connector, t.externalId] }), index('inbound_events_received_idx').on(t.receivedAt)],
);

/** One run of the agent loop. */
export const turns = pgTable(
  'turns',
  {
    id: uuid('id').primaryKey(),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull(),
    status: text('status').notNull(),
    jobId: text('job_id'),
    /** The session (application_name) of the process running it: when that is gone, its job is given back at once. */
    claimedBy: text('claimed_by'),
    origin: jsonb('origin'),
    cancelRequested: boolean('cancel_requested').notNull().default(false),
    modelCalls: integer('model_calls').notNull().default(0),
    inputTokens: integer('input_tokens').notNull().default(0),
    outputTokens: integer('output_tokens').notNull().default(0),
    /** Of the input, what the provider read from its prompt cache, and what it wrote there (when it says). */
    cacheReadTokens: integer('cache_read_tokens').notNull().default(0),
    cacheWriteTokens: integer('cache_write_tokens').notNull().default(0),
    summary: text('summary'),
    error: text('error'),
    startedAt: timestamp('started_at', { withTimezone: true }).notNull().defaultNow(),
    endedAt: timestamp('ended_at', { withTimezone: true }),
  },
  (t) => [
    index('turns_conversation_idx').on(t.conversationId, t.startedAt),
    uniqueIndex('turns_job_idx').on(t.jobId),
  ],
);

/** Every message Parlor sends: written before sending, so a redelivered job does not post twice. */
export const outboundMessages = pgTable(
  'outbound_messages',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    dedupeKey: text('dedupe_key').notNull(),
    turnId: uuid('turn_id'),
    conversationId: text('conversation_id'),
    connector: text('connector').notNull(),
    chat: text('chat').notNull(),
    thread: text('thread'),
    replyTo: text('reply_to'),
    text: text('text').notNull(),
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    platformMessageIds: jsonb('platform_message_ids'),
    /** Absolute paths of files sent with the text (the text is their caption). */
    files: jsonb('files').$type<string[]>(),
    /** Rows of buttons under the message (a question's choices). */
    buttons: jsonb('buttons').$type<{ label: string; data: string }[][]>(),
    /** `message`, or `reaction`: the emoji in `text` set on the message `reply_to`. */
    kind: text('kind').notNull().default('message'),
    /** The one person a group message concerns (shown to them alone where the connector can). */
    privateTo: text('private_to'),
    error: text('error'),
    createdAt: createdAt(),
    /** When a sender took the row ('sending'); a row left 'sending' long after that lost its sender. */
    claimedAt: timestamp('claimed_at', { withTimezone: true }),
    /** The database session (application name) of the process sending the row; gone from pg_stat_activity, it died. */
    claimedBy: text('claimed_by'),
    /** How often it was taken over from a process that died sending it (the platform may have it already). */
    resends: integer('resends').notNull().default(0),
    sentAt: timestamp('sent_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('outbound_dedupe_idx').on(t.dedupeKey),
    index('outbound_pending_idx').on(t.connector, t.id).where(sql`${t.status} = 'pending'`),
    index('outbound_turn_idx').on(t.turnId),
    index('outbound_open_idx').on(t.conversationId).where(sql`${t.status} in ('pending', 'sending')`),
    index('outbound_created_idx').on(t.createdAt),
    index('outbound_sending_idx').on(t.claimedBy).where(sql`${t.status} = 'sending'`),
    /** A chat's open messages: the next one waits for them, so a chat's messages go out in order. */
    index('outbound_open_chat_idx').on(t.connector, t.chat, t.id).where(sql`${t.status} in ('pending', 'sending')`),
  ],
);

/**
 * Platform events that could not be stored. Each failure is counted here (outside the failed transaction); after a
 * few, the event is dead-lettered: kept raw for the owner to look at, and acknowledged so the platform moves on.
 */
export const inboundFailures = pgTable(
  'inbound_failures',
  {
    connector: text('connector').notNull(),
    externalId: text('external_id').notNull(),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    /** The event as JSON text (escaped, so NUL and broken code points survive). */
    raw: text('raw'),
    deadLettered: boolean('dead_lettered').notNull().default(false),
    firstFailedAt: timestamp('first_failed_at', { withTimezone: true }).notNull().defaultNow(),
    lastFailedAt: timestamp('last_failed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.connector, t.externalId] })],
);

/**
 * Threads a connector opened for the bot's replies (a mention answered in a thread on it): what is posted there
 * belongs to the conversation the reply came from.
 */
export const conversationThreads = pgTable(
  'conversation_threads',
  {
    connector: text('connector').notNull(),
    chat: text('chat').notNull(),
    thread: text('thread').notNull(),
    conversationId: text('conversation_id').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.connector, t.chat, t.thread] }), index('conversation_threads_created_idx').on(t.createdAt)],
);

/**
 * A persona's background task (spawn_subagent): its own conversation `<persona>:sub:<handle>`, run as a turn job;
 * its result goes back to the conversation that started it, with the others of its batch (one wake per batch).
 */
export const subagentTasks = pgTable(
  'subagent_tasks',
  {
    handle: text('handle').primaryKey(),
    persona: text('persona').notNull(),
    label: text('label'),
    task: text('task').notNull(),
    /** The tools it may use, when narrowed by the parent. */
    tools: jsonb('tools').$type<string[]>(),
    depth: integer('depth').notNull().default(1),
    parentConversationId: text('parent_conversation_id').notNull(),
    parentTurnId: uuid('parent_turn_id').notNull(),
    /** The chat the parent turn answers in: approvals of the task and its results go there. */
    origin: jsonb('origin'),
    /** queued, running, then ok, failed, cancelled or timeout. */
    status: text('status').notNull().default('queued'),
    result: text('result'),
    error: text('error'),
    createdAt: createdAt(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    /** When its result went to the parent conversation (at most once). */
    pushedAt: timestamp('pushed_at', { withTimezone: true }),
  },
  (t) => [
    index('subagent_tasks_batch_idx').on(t.parentTurnId),
    index('subagent_tasks_parent_idx').on(t.parentConversationId, t.createdAt),
    index('subagent_tasks_persona_idx').on(t.persona, t.status),
  ],
);

/** A persona waiting for another persona's reply (ask_persona); answered once, or given up on (then the reply goes to the inbox). */
export const personaAsks = pgTable('persona_asks', {
  id: uuid('id').primaryKey(),
  source: text('source').notNull(),
  target: text('target').notNull(),
  /** waiting, answered or abandoned. */
  status: text('status').notNull().default('waiting'),
  reply: text('reply'),
  createdAt: createdAt(),
  answeredAt: timestamp('answered_at', { withTimezone: true }),
});

/** When an unknown sender was last told how to get access, so they hear it at most once a day. */
export const senderNotices = pgTable(
  'sender_notices',
  {
    connector: text('connector').notNull(),
    senderId: text('sender_id').notNull(),
    notifiedAt: timestamp('notified_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.connector, t.senderId] })],
);

/**
 * A decision asked of a human: an `ask_user` question, a tool approval or a tool's remote method. Answered by the
 * first valid click, typed reply or API call; the row is the single source of truth across processes.
 */
export const questions = pgTable(
  'questions',
  {
    id: text('id').primaryKey(),
    kind: text('kind').$type<'ask' | 'approval' | 'remote'>().notNull(),
    persona: text('persona').notNull(),
    conversationId: text('conversation_id').notNull(),
    turnId: uuid('turn_id'),
    /** What the tool asked for (`approve`, a remote method's name, `ask_user`). */
    method: text('method').notNull(),
    data: jsonb('data'),
    /** The text shown in the chat. */
    text: text('text').notNull(),
    choices: jsonb('choices').$type<{ id: string; label: string; value?: unknown }[]>().notNull(),
    connector: text('connector'),
    chat: text('chat'),
    thread: text('thread'),
    /** Who may answer besides the persona's approvers (`connector:user id`); anyone allowed in the chat when null. */
    askedUser: text('asked_user'),
    /** Approvals: only the persona's approvers may answer. */
    approversOnly: boolean('approvers_only').notNull().default(false),
    /** The database session (application name) of the process waiting for the answer, when one waits. */
    owner: text('owner'),
    status: text('status').$type<'pending' | 'answered' | 'expired'>().notNull().default('pending'),
    answer: jsonb('answer').$type<{ choice?: string; label: string; value?: unknown }>(),
    answeredBy: text('answered_by'),
    /** How it was answered: `button click on <connector>:<chat>`, `<connector>:<chat>:<message>` (a typed reply), `api`. */
    answeredVia: text('answered_via'),
    answeredAt: timestamp('answered_at', { withTimezone: true }),
    /** Why it expired (timeout, restart). */
    expiredReason: text('expired_reason'),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    /** When the chat message was updated to show the outcome. */
    closedAt: timestamp('closed_at', { withTimezone: true }),
    createdAt: createdAt(),
  },
  (t) => [
    index('questions_pending_idx').on(t.expiresAt).where(sql`${t.status} = 'pending'`),
    index('questions_chat_idx').on(t.connector, t.chat).where(sql`${t.status} = 'pending'`),
    index('questions_unclosed_idx').on(t.connector).where(sql`${t.status} <> 'pending' and ${t.closedAt} is null`),
  ],
);

/** "Always allow": a tool (or, for `shell_exec`, one exact command) a persona may run without asking. */
export const toolGrants = pgTable(
  'tool_grants',
  {
    persona: text('persona').notNull(),
    tool: text('tool').notNull(),
    /** `*` for the whole tool, else what the tool's approval scope names (the exact command). */
    scope: text('scope').notNull(),
    grantedBy: text('granted_by').notNull(),
    questionId: text('question_id'),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.persona, t.tool, t.scope] })],
);

/**
 * Reminders and wake-ups: a turn due at a time, once or every N seconds until a bound. Each firing is a pg-boss
 * job; `fires` counts them, so a redelivered job finds its firing done and does nothing.
 */
export const reminders = pgTable(
  'reminders',
  {
    id: uuid('id').primaryKey(),
    persona: text('persona').notNull(),
    /** Unique per persona among pending ones (a wake-up's name is `wakeup:<conversation>`). */
    name: text('name').notNull(),
    kind: text('kind').$type<'reminder' | 'wakeup'>().notNull(),
    /** The conversation the turn runs in. */
    conversationId: text('conversation_id').notNull(),
    prompt: text('prompt').notNull(),
    /** The chat that asked (where `reply_to_origin` answers when no `deliver` is set). */
    origin: jsonb('origin').$type<{ connector: string; chat: string; thread?: string; chatType?: 'dm' | 'group'; sender?: string }>(),
    deliver: jsonb('deliver').$type<{ connector: string; chat: string; thread?: string }>(),
    /** When it fires next. */
    dueAt: timestamp('due_at', { withTimezone: true }).notNull(),
    everySeconds: integer('every_seconds'),
    until: timestamp('until', { withTimezone: true }),
    status: text('status').$type<'pending' | 'done' | 'cancelled'>().notNull().default('pending'),
    fires: integer('fires').notNull().default(0),
    lastFiredAt: timestamp('last_fired_at', { withTimezone: true }),
    /** The key of the tool call that set it (ToolContext.callKey): the same call run again (a resumed turn) finds it. */
    callId: text('call_id'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('reminders_pending_name_idx').on(t.persona, t.name).where(sql`${t.status} = 'pending'`),
    uniqueIndex('reminders_call_idx').on(t.persona, t.callId).where(sql`${t.callId} is not null`),
    index('reminders_due_idx').on(t.dueAt).where(sql`${t.status} = 'pending'`),
  ],
);

/** Heartbeat and cron entries held by `remind pause` (`*`: all of the persona's). */
export const schedulePauses = pgTable(
  'schedule_pauses',
  {
    persona: text('persona').notNull(),
    name: text('name').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.persona, t.name] })],
);

/**
 * Commands left running in the background (shell_exec past its yield, or `background: true`): what they are, who
 * runs them, and how they ended. Their output lives in the process that runs them; the tail is kept here at the end.
 */
export const backgroundProcesses = pgTable(
  'background_processes',
  {
    /** `bg_<hex>`, the handle the model uses. */
    id: text('id').primaryKey(),
    persona: text('persona').notNull(),
    conversationId: text('conversation_id').notNull(),
    turnId: uuid('turn_id'),
    command: text('command').notNull(),
    /** The chat of the turn that started it: its wake answers there. */
    origin: jsonb('origin'),
    /** The database session of the Parlor process that runs it. */
    owner: text('owner').notNull(),
    /** Found in the environment of a command run outside the sandbox, to kill what a crashed process left. */
    tag: text('tag'),
    /** running, then exited, killed or lost (its Parlor process ended). */
    state: text('state').notNull().default('running'),
    /** `exit=<status>` as shell_exec reports it. */
    exitStatus: text('exit_status'),
    tail: text('tail'),
    startedAt: timestamp('started_at', { withTimezone: true }).notNull().defaultNow(),
    endedAt: timestamp('ended_at', { withTimezone: true }),
    /** The model removed it (process remove): no longer listed. */
    removedAt: timestamp('removed_at', { withTimezone: true }),
  },
  (t) => [index('background_processes_conversation_idx').on(t.conversationId, t.startedAt), index('background_processes_persona_idx').on(t.persona, t.state)],
);

/** Postgres full-text search vectors (drizzle has no column type for them). */
const tsvector = customType<{ data: string }>({ dataType: () => 'tsvector' });

/**
 * The text search configuration of memories, in the column and in every query alike. `english` (not `simple`):
 * recall ORs the words of a query and ranks the matches, so stop words ("the", "what") must drop out and "dogs" must
 * find "dog". Names are stemmed the same way on both sides, and the trigram index matches the raw text besides.
 */
export const MEMORY_TEXT_SEARCH = 'english';

/** A persona's journal: what it chose to remember (the memory tool), found again by recall. */
export const memories = pgTable(
  'memories',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    persona: text('persona').notNull(),
    category: text('category').notNull().default('note'),
    content: text('content').notNull(),
    /** 1..10: how much it matters; recall ranks by it a little, and lists by it without a query. */
    importance: integer('importance').notNull().default(5),
    createdAt: createdAt(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    /** Its embedding, once the embedding job has run (when an embedding endpoint is configured), and by which model. */
    embedding: real('embedding').array(),
    embeddingModel: text('embedding_model'),
    /** The category weighs more than the content (A over B) in the rank. */
    search: tsvector('search')
      .notNull()
      .generatedAlwaysAs(
        sql`setweight(to_tsvector('english', coalesce("category", '')), 'A') || setweight(to_tsvector('english', coalesce("content", '')), 'B')`,
      ),
  },
  (t) => [
    index('memories_persona_idx').on(t.persona, t.createdAt),
    index('memories_search_idx').using('gin', t.search),
    // The newest of each importance, for recall without a query (the best `limit` are among them).
    index('memories_importance_idx').on(t.persona, t.importance, t.createdAt),
    check('memories_importance_check', sql`${t.importance} between 1 and 10`),
  ],
);

/** What a persona knows of each person it talks to, one row per aspect (dimension); shown in that person's turns. */
export const userModels = pgTable(
  'user_models',
  {
    persona: text('persona').notNull(),
    /** `connector:user id`, as the turn's origin names the sender. */
    userAddress: text('user_address').notNull(),
    dimension: text('dimension').notNull(),
    content: text('content').notNull(),
    /** 0..1. */
    confidence: real('confidence').notNull().default(0.7),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.persona, t.userAddress, t.dimension] })],
);

/** A document a persona was given to read (knowledge_ingest): where it stands, and how many chunks it has. */
export const knowledgeSources = pgTable(
  'knowledge_sources',
  {
    persona: text('persona').notNull(),
    /** The name the persona gave it; ingesting the same name again replaces its chunks. */
    source: text('source').notNull(),
    /** The workspace file it came from, when it came from one. */
    path: text('path'),
    /** ingesting, ready or failed. */
    state: text('state').notNull().default('ingesting'),
    error: text('error'),
    chunks: integer('chunks').notNull().default(0),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.persona, t.source] })],
);

/** The paragraph-aligned pieces of a knowledge source, each searchable by recall. */
export const knowledgeChunks = pgTable(
  'knowledge_chunks',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    persona: text('persona').notNull(),
    source: text('source').notNull(),
    /** Its place in the source, from 0. */
    chunk: integer('chunk').notNull(),
    content: text('content').notNull(),
    embedding: real('embedding').array(),
    embeddingModel: text('embedding_model'),
    createdAt: createdAt(),
    search: tsvector('search')
      .notNull()
      .generatedAlwaysAs(sql`to_tsvector('english', coalesce("content", ''))`),
  },
  (t) => [
    uniqueIndex('knowledge_chunks_source_idx').on(t.persona, t.source, t.chunk),
    index('knowledge_chunks_search_idx').using('gin', t.search),
  ],
);

/**
 * Every word (3 to 40 letters or digits, lower case) a persona's memories and knowledge chunks contain, kept by
 * triggers on those tables: recall finds the words a misspelt query word stands for here, by trigram similarity,
 * and then searches for them by full text, so a typo costs a look in a few thousand words rather than in every text.
 */
export const recallWords = pgTable(
  'recall_words',
  {
    persona: text('persona').notNull(),
    word: text('word').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.persona, t.word] }),
    // Needs pg_trgm: the migration creates it only where the extension is there.
    index('recall_words_trgm_idx').using('gin', sql`${t.word} gin_trgm_ops`),
  ],
);

/**
 * The summary of a conversation's oldest messages, which the next turns carry before their window: refreshed in
 * steps, so the prompt's prefix stays the same from one turn to the next.
 */
export const conversationSummaries = pgTable('conversation_summaries', {
  conversationId: text('conversation_id').primaryKey(),
  summary: text('summary').notNull(),
  /** The last message id the summary covers; the window starts after it. */
  throughMessageId: integer('through_message_id').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * The heartbeat of each running Parlor process (by its session name, see Database.applicationName). A process whose
 * connections stay open but that has stopped beating (stopped, frozen, cut off) is fenced: its connections are
 * terminated and its work is handed to the others, and it stops when it finds itself fenced.
 */
export const processBeats = pgTable('process_beats', {
  session: text('session').primaryKey(),
  beatAt: timestamp('beat_at', { withTimezone: true }).notNull().defaultNow(),
  fencedAt: timestamp('fenced_at', { withTimezone: true }),
});
