import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Database } from '#src/db/client.ts';
import { expireQuestion, getQuestion, pendingQuestions, type QuestionRow } from '#src/db/questions.ts';
import type { RemoteMethodRequest } from '#src/tools/types.ts';
import type { ChatQuestions } from './chat-questions.ts';
import { newQuestionId } from './codec.ts';
import { normalizeChoices, view, type QuestionView } from './format.ts';
import { answerForResult } from './permissions.ts';
import { summarizeArgs } from './summary.ts';
import { RemoteMethodCancelled, RemoteMethodTimeout, type QuestionScope, type WaitForAnswer } from './waiting.ts';
import type { DeliveryTarget } from '#src/turns.ts';

const DEFAULT_REMOTE_TIMEOUT_MS = 120_000;

export type QuestionEvent = { type: 'method.pending' | 'method.done'; question: QuestionView };

export type RemoteMethods = ReturnType<typeof createRemoteMethods>;

/**
 * Remote methods: a tool's turn waits for a person's answer (approvals wait the same way), and other UIs follow
 * every open question and answer it through the API.
 */
export function createRemoteMethods(deps: {
  database: Database;
  questions: Pick<ChatQuestions, 'open' | 'close' | 'publish' | 'resolve'>;
  log: Logger;
}) {
  const { db } = deps.database;
  const { open, close, publish, resolve } = deps.questions;
  const { log } = deps;
  const waiters = new Map<string, (row: QuestionRow) => void>();
  /** Turns of this process waiting on a person, by question. */
  const waitingTurns = new Map<string, string>();
  const events = new EventEmitter();
  events.setMaxListeners(0);

  /** Persists, shows and waits for one answer. */
  const waitForAnswer: WaitForAnswer = async (scope, request) => {
    const id = newQuestionId();
    const { destination } = request;
    const settled = new Promise<QuestionRow>((resolve) => waiters.set(id, resolve));
    waitingTurns.set(id, scope.turnId);
    try {
      await open(
        {
          id,
          kind: request.kind,
          persona: scope.persona.name,
          conversationId: scope.conversationId,
          turnId: scope.turnId,
          method: request.method,
          data: request.data ?? null,
          text: request.text,
          choices: request.choices,
          connector: destination?.connector,
          chat: destination?.chat,
          thread: destination?.thread,
          askedUser: scope.kind === 'user' ? scope.origin?.sender : undefined,
          approversOnly: request.approversOnly,
          owner: deps.database.applicationName,
          expiresAt: new Date(Date.now() + request.timeoutMs),
        },
        destination,
      );
      let timer: NodeJS.Timeout | undefined;
      let onAbort = () => {};
      const outcome = await Promise.race<QuestionRow | 'timeout' | 'aborted'>([
        settled,
        new Promise((resolve) => {
          timer = setTimeout(() => resolve('timeout'), request.timeoutMs);
        }),
        new Promise((resolve) => {
          onAbort = () => resolve('aborted');
          if (scope.signal.aborted) onAbort();
          else scope.signal.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
      clearTimeout(timer);
      scope.signal.removeEventListener('abort', onAbort);
      if (typeof outcome !== 'string') {
        if (outcome.status === 'answered') return outcome;
        // Expired elsewhere: past its time (the sweep), or closed for a reason of its own (the terminal's input ended).
        if (outcome.expiredReason && outcome.expiredReason !== 'no answer in time') throw new RemoteMethodCancelled(outcome.expiredReason);
        throw new RemoteMethodTimeout(`no answer within ${Math.round(request.timeoutMs / 1000)}s`);
      }
      const reason = outcome === 'timeout' ? 'no answer in time' : scope.signal.reason === 'shutdown' ? 'Parlor restarted while it waited' : 'the turn was stopped';
      const expired = await expireQuestion(db, id, reason);
      if (!expired) {
        // Answered at the last moment: the answer stands.
        const answered = await getQuestion(db, id);
        if (answered?.status === 'answered') return answered;
      } else {
        await publish('done', id);
        // Updated here as well: at shutdown the notification may come after the connector has stopped.
        await close(id).catch((err) => log.warn({ err, question: id }, 'could not update the question message'));
      }
      throw outcome === 'timeout' ? new RemoteMethodTimeout(`no answer within ${Math.round(request.timeoutMs / 1000)}s`) : new RemoteMethodCancelled(reason);
    } finally {
      waiters.delete(id);
      waitingTurns.delete(id);
    }
  };

  return {
    waitForAnswer,
    /** Hands a question that is no longer pending to the turn of this process waiting on it, if there is one. */
    settle(row: QuestionRow) {
      waiters.get(row.id)?.(row);
    },
    /** Notifications are a shortcut: a waiter whose answer was missed picks it up here. */
    async recheckWaiters() {
      if (waiters.size) {
        for (const id of waiters.keys()) {
          const row = await getQuestion(db, id);
          if (row && row.status !== 'pending') waiters.get(id)?.(row);
        }
      }
    },
    /** Tells the API listeners of this process. */
    emit(event: QuestionEvent) {
      events.emit('event', event);
    },

    /** `ctx.remoteMethod`: resolves with the chosen value, rejects with RemoteMethodTimeout when nobody answers. */
    async remoteMethod(scope: QuestionScope, request: RemoteMethodRequest, destination: DeliveryTarget | undefined): Promise<unknown> {
      const choices = normalizeChoices(request.choices ?? []);
      const row = await waitForAnswer(scope, {
        kind: 'remote',
        method: request.method,
        data: request.data,
        text: request.text ?? `❓ ${request.method}\n${summarizeArgs(request.data)}`,
        choices,
        timeoutMs: request.timeoutMs ?? DEFAULT_REMOTE_TIMEOUT_MS,
        destination,
        approversOnly: false,
      });
      return row.answer!.value !== undefined ? row.answer!.value : (row.answer!.choice ?? row.answer!.label);
    },

    /** An answer from the HTTP API: the value of a choice (or its id or label), or any value when there are none. */
    async answerFromApi(id: string, result: unknown): Promise<{ status: 'ok'; question: QuestionView } | { status: 'not_found' } | { status: 'invalid'; error: string }> {
      const row = await getQuestion(db, id);
      if (!row || row.status !== 'pending' || row.expiresAt.getTime() <= Date.now()) return { status: 'not_found' };
      const answer = answerForResult(row.choices, result);
      if ('error' in answer) return { status: 'invalid', error: answer.error };
      const answered = await resolve(row, { answer, by: 'the API', via: 'api' });
      return answered ? { status: 'ok', question: view(answered) } : { status: 'not_found' };
    },

    async pending(): Promise<QuestionView[]> {
      return (await pendingQuestions(db)).map(view);
    },

    /** Pending and done events from every process, until the returned function is called. */
    subscribe(listener: (event: QuestionEvent) => void): () => void {
      events.on('event', listener);
      return () => events.off('event', listener);
    },

    /** Turns in this process that wait for an answer (at shutdown they are released at once, not waited for). */
    waitingTurns: (): string[] => [...new Set(waitingTurns.values())],
  };
}
