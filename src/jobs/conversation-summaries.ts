import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import type { Database } from '#src/db/client.ts';
import { getConversation } from '#src/db/conversations.ts';
import { getConversationSummary, saveConversationSummary } from '#src/db/conversation-summaries.ts';
import { recentMessages } from '#src/db/messages.ts';
import type { HistoryBudget } from '#src/agent/history.ts';
import { SUMMARY_SHARE, type SummaryRequest } from '#src/agent/history-window.ts';
import type { ChatMessage, ModelClient } from '#src/llm/types.ts';
import type { JobSystem } from './boss.ts';
import { fading } from './fading-set.ts';
import { QUEUES, type ConversationSummaryJobData } from './queues.ts';
import { stableUuid } from './stable-uuid.ts';

export const SUMMARY_SYSTEM_PROMPT = [
  'You keep the running summary of a conversation between a person (or people) and an assistant persona.',
  'You are given the summary so far (if any) and the messages that followed it. Write the updated summary: who is',
  'involved, what was asked, decided, promised and done, facts the person shared, open questions and tasks, in',
  'plain prose or short bullet points, past tense, without greetings or filler. Write only the summary.',
].join(' ');

/** Of the messages to summarise, at most this many are read (the newest). */
const MAX_ROWS = 400;
/** How many summaries a process writes at once. */
const SUMMARY_CONCURRENCY = 4;
/** How many asks make a generation of the steps a process remembers asking for. */
const ASKED_GENERATION = 5000;
/** A tool call's arguments and a tool's result are shortened to this in the transcript the summary is made from. */
const TOOL_TEXT = 400;

export interface ConversationSummaries {
  /**
   * Asks for the summary of a conversation up to a step. Asking again for the same step sends nothing; from another
   * process, it makes no second job.
   */
  request: SummaryRequest;
  /** Writes the summary of one step (what the job does). */
  summarise(data: ConversationSummaryJobData): Promise<'stored' | 'not needed'>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The summaries of what left conversations' history windows: written by the model in a job of their own, off the
 * turn's path, one per step of the window (the job's id is the conversation and the step, so however many turns ask,
 * it runs once). Each extends the one before it, so the summary covers everything before the window.
 */
export function createConversationSummaries(deps: {
  database: Database;
  jobs: JobSystem;
  model: ModelClient;
  defaultModel: string;
  personas: () => readonly Persona[];
  budget: HistoryBudget;
  log: Logger;
  worker: boolean;
}): ConversationSummaries {
  const { db } = deps.database;
  let working = false;

  async function summarise(data: ConversationSummaryJobData): Promise<'stored' | 'not needed'> {
    const conversation = await getConversation(db, data.conversationId);
    const persona = deps.personas().find((p) => p.name === data.persona);
    if (!conversation || !persona || data.throughMessageId <= conversation.historyAfterId) return 'not needed';
    const stored = await getConversationSummary(db, data.conversationId);
    const previous = stored && stored.throughMessageId > conversation.historyAfterId ? stored : undefined;
    if (previous && previous.throughMessageId >= data.throughMessageId) return 'not needed';
    const rows = await recentMessages(db, data.conversationId, {
      afterId: previous?.throughMessageId ?? conversation.historyAfterId,
      throughId: data.throughMessageId,
      limit: MAX_ROWS,
    });
    const maxChars = Math.floor(deps.budget.maxChars * SUMMARY_SHARE) - 200;
    const lines = transcriptLines(rows.map((r) => r.message), deps.budget.maxChars);
    const response = await deps.model.complete({
      model: persona.tools.model ?? deps.defaultModel,
      system: SUMMARY_SYSTEM_PROMPT,
      messages: [
        {
          role: 'user',
          content: [
            previous ? `Summary so far:\n${previous.summary}` : 'There is no summary yet.',
            '',
            'Messages that followed:',
            ...lines,
            '',
            `Write the updated summary, at most ${Math.floor(maxChars / 6)} words.`,
          ].join('\n'),
        },
      ],
      tools: [],
      maxTokens: Math.ceil(maxChars / 3),
    });
    const summary = cut(response.text.trim(), maxChars);
    // Thrown, so the job is retried: the turns go on meanwhile with the summary they have.
    if (!summary) throw new Error('the model wrote an empty summary');
    const saved = await saveConversationSummary(db, { conversationId: data.conversationId, summary, throughMessageId: data.throughMessageId });
    deps.log.info({ conversation: data.conversationId, through: data.throughMessageId, messages: rows.length, usage: response.usage, saved }, 'conversation summary written');
    return saved ? 'stored' : 'not needed';
  }

  // The steps this process has asked for. Every turn finds the newest step of its window until that step's summary
  // is written, and would otherwise send its job again (a statement and a commit on the turn's path, which the job's id
  // makes a no-op). A step is forgotten after ASKED_GENERATION to twice as many asks for other steps.
  const asked = fading();
  let asks = 0;

  return {
    async request(data) {
      const id = stableUuid(`summary:${data.conversationId}:${data.throughMessageId}`);
      if (asked.has(id)) return;
      await deps.jobs.send(QUEUES.conversationSummary, data, { id, group: data.conversationId });
      asked.add(id);
      if (++asks % ASKED_GENERATION === 0) asked.age();
    },
    summarise,
    async start() {
      if (!deps.worker) return;
      working = true;
      // Several conversations at once: each waits on the model, and one at a time (a second apart) fell behind busy
      // conversations, whose turns then read ever more history. One conversation's steps one after the other, so each
      // extends the summary before it (a later step made from the same start would keep only the newest messages that
      // fit): not handed out while one of its conversation's runs, and run after it here when two are fetched together.
      // Each of the workers polls the queue every second when it is empty.
      const options = { batchSize: 1, pollingIntervalSeconds: 1, localConcurrency: SUMMARY_CONCURRENCY, groupConcurrency: 1 };
      const running = new Map<string, Promise<unknown>>();
      await deps.jobs.boss.work<ConversationSummaryJobData>(QUEUES.conversationSummary, options, async ([job]) => {
        const { conversationId } = job.data;
        const mine = (running.get(conversationId) ?? Promise.resolve()).catch(() => {}).then(() => summarise(job.data));
        running.set(conversationId, mine);
        try {
          await mine;
        } finally {
          if (running.get(conversationId) === mine) running.delete(conversationId);
        }
      });
    },
    async stop() {
      if (working) await deps.jobs.boss.offWork(QUEUES.conversationSummary, { wait: true }).catch(() => {});
    },
  };
}

/** The messages as lines of a transcript, the newest that fit in `maxChars`. */
function transcriptLines(messages: readonly ChatMessage[], maxChars: number): string[] {
  const lines: string[] = [];
  let room = maxChars;
  for (let i = messages.length - 1; i >= 0 && room > 0; i--) {
    const m = messages[i];
    const line =
      m.role === 'user'
        ? `User: ${m.content}`
        : m.role === 'tool'
          ? `(${m.name} answered: ${cut(m.content, TOOL_TEXT)})`
          : [m.content && `Assistant: ${m.content}`, ...(m.toolCalls ?? []).map((c) => `(assistant called ${c.name} ${cut(c.arguments, TOOL_TEXT)})`)].filter(Boolean).join('\n');
    if (!line) continue;
    lines.unshift(cut(line, room));
    room -= line.length + 1;
  }
  return lines;
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}
