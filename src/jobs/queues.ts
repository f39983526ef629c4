// Every pg-boss queue Parlor uses, in one place.

export const QUEUES = {
  /** One job per reason a conversation takes a turn; FIFO and one at a time per conversation. */
  turn: 'turn',
  /** One job per firing of a reminder or wake-up, due at its time. */
  reminder: 'reminder',
  /** Heartbeat and cron entries of `schedules.jsonc`: pg-boss schedules send one job per occurrence. */
  cron: 'cron',
  /** A batch of background tasks (spawn_subagent) has results for the conversation that started it. */
  subagentPush: 'subagent-push',
  /** The oldest part of a conversation that left the history window, summarised once per step of the window. */
  conversationSummary: 'conversation-summary',
  /** A knowledge source too large to ingest in the turn (knowledge_ingest): read, chunked and stored in a job. */
  knowledgeIngest: 'knowledge-ingest',
  /** Memories and knowledge chunks to embed (when an embedding endpoint is configured), a batch per job. */
  embed: 'embed',
} as const;

export interface SubagentPushJobData {
  /** The parent turn whose tasks these are. */
  batch: string;
}

export interface ConversationSummaryJobData {
  persona: string;
  conversationId: string;
  /** The step: the summary covers the conversation up to this message id. */
  throughMessageId: number;
}

export interface ReminderJobData {
  reminderId: string;
  /** Which firing this job is (the reminder's `fires` count when it was scheduled). */
  fire: number;
}

export interface CronJobData {
  persona: string;
  name: string;
}

export interface KnowledgeIngestJobData {
  persona: string;
  source: string;
  /** The workspace file, read again by the job through the workspace's rules. */
  path: string;
}

export interface EmbedJobData {
  table: 'memories' | 'knowledge_chunks';
  ids: number[];
}
