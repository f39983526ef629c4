import {
  expireOrphans,
  expireDueQuestions,
  orphanedQuestionIds,
  expireConversationQuestions,
  getQuestion,
  hasPendingQuestion,
  pendingQuestions,
  unclosedQuestionIds,
} from '#src/db/questions.ts';
import { goneAtTwoPasses } from '#src/db/sessions.ts';
import { createChatQuestions, type ChatQuestionsDeps } from './chat-questions.ts';
import { view } from './format.ts';
import { createApprovalGate } from './approvals.ts';
import { createRemoteMethods } from './remote-methods.ts';
import { CHANNELS, listen } from '#src/db/channels.ts';

export { RemoteMethodCancelled, RemoteMethodTimeout, type QuestionScope } from './waiting.ts';

export { MAX_CHOICES, type Choice, type QuestionView } from './format.ts';

export type { QuestionEvent } from './remote-methods.ts';

export interface QuestionsDeps extends ChatQuestionsDeps {
  /** How often open questions are checked for expiry and lost notifications. */
  sweepMs?: number;
}

export type Questions = ReturnType<typeof createQuestions>;

/**
 * Questions, approvals and remote methods. A question is a row first; it is resolved by one conditional update
 * (the first valid click, typed reply or API answer wins), and every process hears of it through a notification:
 * the one waiting resumes its tool, the one running the chat's connector updates the message, API listeners see it.
 */
export function createQuestions(deps: QuestionsDeps) {
  const { db, sql } = deps.database;
  const log = deps.log.child({ module: 'questions' });
  const chat = createChatQuestions({
    database: deps.database,
    delivery: deps.delivery,
    jobs: deps.jobs,
    personas: deps.personas,
    connectors: deps.connectors,
    log,
  });
  const remote = createRemoteMethods({ database: deps.database, questions: chat, log });
  const { publish, close } = chat;
  let listener: { unlisten(): Promise<void> } | undefined;
  let sweepTimer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  let stopped = false;

  async function onNotification(payload: string) {
    const [what, id] = payload.split(':');
    if (!id) return;
    const row = await getQuestion(db, id);
    if (!row) return;
    if (what === 'pending') {
      // Already resolved by the time this is read: its done event follows; a stale pending one would mislead.
      if (row.status === 'pending') remote.emit({ type: 'method.pending', question: view(row) });
      return;
    }
    if (row.status === 'pending') return;
    remote.settle(row);
    remote.emit({ type: 'method.done', question: view(row) });
    await close(row.id);
  }

  /** Questions whose waiting process is gone at two sweeps in a row are expired. */
  const orphanedTwice = goneAtTwoPasses<string>();

  async function sweep() {
    const orphaned = orphanedTwice(await orphanedQuestionIds(db));
    const expired = [...(await expireDueQuestions(db)), ...(await expireOrphans(db, orphaned))];
    for (const row of expired) await publish('done', row.id);
    await remote.recheckWaiters();
    for (const id of await unclosedQuestionIds(db, [...deps.connectors.keys()])) await close(id);
  }

  function scheduleSweep() {
    sweeping ??= sweep()
      .catch((err) => log.warn({ err }, 'question sweep failed'))
      .finally(() => (sweeping = undefined));
  }

  return {
    async start() {
      // Handled one after another, so listeners see a question's events in the order they happened.
      let chain = Promise.resolve();
      let listens = 0;
      listener = await listen(
        sql,
        CHANNELS.question,
        (payload) => {
          chain = chain.then(() => onNotification(payload)).catch((err) => log.warn({ err }, 'question notification failed'));
        },
        () => {
          // Listening again after a lost connection: what was announced meanwhile never came. Waiters and message
          // updates catch up in a sweep; API listeners get every open question again (they know them by id).
          if (listens++ === 0) return;
          log.warn('question notifications resumed after a lost connection; catching up');
          chain = chain
            .then(async () => {
              for (const row of await pendingQuestions(db)) remote.emit({ type: 'method.pending', question: view(row) });
            })
            .catch((err) => log.warn({ err }, 'question catch-up failed'));
          scheduleSweep();
        },
      );
      sweepTimer = setInterval(scheduleSweep, deps.sweepMs ?? 3000);
      sweepTimer.unref();
      scheduleSweep();
    },

    async stop() {
      stopped = true;
      clearInterval(sweepTimer);
      await sweeping;
      await chat.closesInFlight();
      await listener?.unlisten().catch(() => {});
    },

    remoteMethod: remote.remoteMethod,

    /** The gate the tool runner calls before a tool in the persona's `approve` list runs. */
    approvalGate: createApprovalGate({ db, waitForAnswer: remote.waitForAnswer }),

    ask: chat.ask,
    handleClick: chat.handleClick,
    answerTyped: chat.answerTyped,
    answerFromApi: remote.answerFromApi,
    pending: remote.pending,
    subscribe: remote.subscribe,

    /** Whether a conversation is waiting on a person (its open question is shown somewhere). */
    awaitingAnswer: (conversationId: string): Promise<boolean> => hasPendingQuestion(db, conversationId),

    waitingTurns: remote.waitingTurns,

    /**
     * Closes a conversation's open questions with a reason (the terminal's input ended, say): a tool waiting on one
     * is told no, with that reason, and the messages show it.
     */
    async expireOpen(conversationId: string, reason: string): Promise<number> {
      const expired = await expireConversationQuestions(db, conversationId, reason);
      for (const row of expired) {
        await publish('done', row.id);
        // Heard here at once too: the notification may come after this process has moved on.
        remote.settle(row);
      }
      return expired.length;
    },

    /**
     * Shows the outcome of the conversation's resolved questions in their chat now, and waits for those under way: a
     * process about to stop (a terminal session ending) would otherwise leave one whose notification has not come yet
     * to the next process that runs the connector.
     */
    async closeResolved(conversationId: string): Promise<void> {
      for (const id of await unclosedQuestionIds(db, [...deps.connectors.keys()], conversationId)) await close(id);
      await chat.closesInFlight();
    },

    /** Runs the expiry and clean-up pass now (tests, and start-up). */
    sweep: () => (stopped ? Promise.resolve() : sweep()),
  };
}
