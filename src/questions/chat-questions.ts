import type { Logger } from 'pino';
import { canEdit, connectorForChat, type Connector, type InboundEvent, type IngressResult } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import type { Database, Queryable } from '#src/db/client.ts';
import { getConversation } from '#src/db/conversations.ts';
import { recordInboundEvent } from '#src/db/inbound-events.ts';
import { insertMessage } from '#src/db/messages.ts';
import { outboundByKey } from '#src/db/outbound-messages.ts';
import {
  answerQuestion,
  claimQuestionClose,
  reopenQuestionClose,
  expireQuestion,
  getQuestion,
  insertQuestion,
  insertToolGrant,
  openQuestionInChat,
  type NewQuestion,
  type QuestionAnswer,
  type QuestionRow,
} from '#src/db/questions.ts';
import type { Delivery } from '#src/agent/delivery.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import { withRetries } from '#src/retry.ts';
import type { ChoiceSpec } from '#src/tools/types.ts';
import { decodeChoice, encodeChoice, newQuestionId, shortQuestionId } from './codec.ts';
import { buttonsLine, closedNotice, closedText, INACTIVE, outcomeLine, LONG_QUESTION, normalizeChoices, pickChoice, questionText, who } from './format.ts';
import { mayAnswerByTyping, mayAnswerClick } from './permissions.ts';
import type { QuestionScope } from './waiting.ts';
import { CHANNELS, notify } from '#src/db/channels.ts';
import type { DeliveryTarget } from '#src/turns.ts';

class NotResolved extends Error {}

export type ChatQuestions = ReturnType<typeof createChatQuestions>;

export interface ChatQuestionsDeps {
  database: Database;
  delivery: Delivery;
  jobs: Pick<JobSystem, 'enqueueTurn'>;
  personas: () => readonly Persona[];
  /** Connectors running in this process: this process updates the messages it can edit. */
  connectors: ReadonlyMap<string, Connector>;
  log: Logger;
}

/**
 * Questions as a chat sees them: a row that is announced and then shown with its buttons, answered by a click or
 * a typed reply, and closed in its message. An `ask_user` answer wakes the asking conversation; an approval's
 * "Always allow" becomes a grant.
 */
export function createChatQuestions(deps: ChatQuestionsDeps) {
  const { db } = deps.database;
  const { log } = deps;

  const publish = (what: 'pending' | 'done', id: string) => notify(db, CHANNELS.question, `${what}:${id}`);

  const closing = new Map<string, Promise<void>>();

  /** Shows the outcome in the question's message, and removes its buttons. One process does it, once. */
  function close(id: string): Promise<void> {
    let pending = closing.get(id);
    if (!pending) {
      pending = closeMessage(id).finally(() => closing.delete(id));
      closing.set(id, pending);
    }
    return pending;
  }

  /**
   * Where the connector can still edit the question's message, its outcome replaces the buttons; where it cannot
   * (no edits, or past the platform's edit window), the outcome is posted as a reply to it.
   */
  async function closeMessage(id: string) {
    const candidate = await getQuestion(db, id);
    if (!candidate?.connector || !candidate.chat || !localConnector(candidate.connector, candidate.chat)) return;
    const sent = await outboundByKey(db, `question:${id}`);
    // Still on its way: it is updated once it is out (the sweep comes back to it).
    if (sent && (sent.status === 'pending' || sent.status === 'sending')) return;
    const row = await claimQuestionClose(db, id);
    // Never sent: no buttons are shown anywhere, so there is nothing to update.
    if (!row || sent?.status !== 'sent' || !sent.ids.length) return;
    const connector = localConnector(sent.connector, sent.chat)!;
    const messageId = sent.ids[sent.ids.length - 1];
    const editable = connector.edit && connector.capabilities.removeButtons && canEdit(connector.capabilities, sent.sentAt);
    try {
      if (editable) {
        await withRetries(() => connector.edit!(sent.chat, messageId, closedText(row), row.thread ?? undefined), { deadlineMs: 60_000 });
        return;
      }
      const posted = await deps.delivery.deliver({
        dedupeKey: `question:${id}:outcome`,
        conversationId: row.conversationId,
        connector: sent.connector,
        chat: sent.chat,
        thread: row.thread ?? undefined,
        replyTo: messageId,
        text: `Q#${shortQuestionId(row.id)}: ${outcomeLine(row)}`,
      });
      if (posted.status === 'failed') throw new Error(posted.error);
    } catch (err) {
      log.warn({ err, question: id }, 'could not update the question message; trying again later');
      await reopenQuestionClose(db, id);
    }
  }

  const localConnector = (id: string, chat: string) => connectorForChat(deps.connectors, id, chat);

  /**
   * Opens a question: the row is written (and announced) before its message is sent. A message that cannot be
   * sent expires the question and throws, so nobody waits for an answer that cannot come.
   */
  async function open(question: NewQuestion, destination: DeliveryTarget | undefined): Promise<QuestionRow> {
    const row = await insertQuestion(db, question);
    await publish('pending', row.id);
    const failed = destination && (await show(row, destination));
    if (failed) {
      await expireQuestion(db, row.id, `it could not be shown: ${failed}`);
      await publish('done', row.id);
      throw new Error(`the question could not be shown in ${destination.connector}:${destination.chat}: ${failed}`);
    }
    return row;
  }

  /** Questions being shown in this process, by chat: the last one's sending, which the next one waits for. */
  const showing = new Map<string, Promise<unknown>>();

  /**
   * Sends the question's message with its buttons; returns an error text when it could not be sent. A long question
   * goes as its text, then a short message with the buttons (the one updated once it is answered), replying to the
   * text when its id is known, both naming the question's short id. A question's messages go out back to back: other
   * questions for the same chat wait until they are out. That holds within a process; questions that processes show
   * at once in one chat may still interleave, and their short ids tell them apart.
   */
  function show(row: QuestionRow, destination: DeliveryTarget): Promise<string | undefined> {
    const key = JSON.stringify([destination.connector, destination.chat, destination.thread ?? null]);
    const previous = showing.get(key) ?? Promise.resolve();
    const sending = previous.then(() => sendQuestion(row, destination));
    const settled = sending.catch(() => {});
    showing.set(key, settled);
    void settled.then(() => {
      if (showing.get(key) === settled) showing.delete(key);
    });
    return sending;
  }

  async function sendQuestion(row: QuestionRow, destination: DeliveryTarget): Promise<string | undefined> {
    const where = {
      turnId: row.turnId ?? undefined,
      conversationId: row.conversationId,
      connector: destination.connector,
      chat: destination.chat,
      thread: destination.thread,
    };
    const long = row.text.length > LONG_QUESTION;
    let textId: string | undefined;
    if (long) {
      const body = await deps.delivery.deliver({ ...where, dedupeKey: `question:${row.id}:text`, replyTo: destination.replyTo, text: questionText(row) });
      if (body.status === 'failed') return body.error ?? 'delivery failed';
      // Sent (now or before): the buttons reply to its first part, which begins with the question's short id.
      const sent = body.status === 'queued' ? undefined : await outboundByKey(db, `question:${row.id}:text`);
      textId = sent?.status === 'sent' ? sent.ids[0] : undefined;
    }
    const result = await deps.delivery.deliver({
      ...where,
      dedupeKey: `question:${row.id}`,
      replyTo: long ? textId : destination.replyTo,
      text: long ? buttonsLine(row) : row.text,
      buttons: row.choices.length ? [row.choices.map((c) => ({ label: c.label, data: encodeChoice(row.id, c.id) }))] : undefined,
    });
    return result.status === 'failed' ? (result.error ?? 'delivery failed') : undefined;
  }

  /**
   * Records an answer and what follows from it in one transaction: an `ask_user` answer becomes a message (and a
   * turn) in the asking conversation; "Always allow" becomes a grant. Undefined when somebody else was first.
   */
  async function resolve(
    row: QuestionRow,
    answer: { answer: QuestionAnswer; by: string; via: string; from?: InboundEvent },
    options: { tx?: Queryable } = {},
  ): Promise<QuestionRow | undefined> {
    const work = async (tx: Queryable) => {
      const answered = await answerQuestion(tx, row.id, { answer: answer.answer, answeredBy: answer.by, answeredVia: answer.via });
      if (!answered) return undefined;
      if (row.kind === 'ask') await wakeAsker(tx, answered, answer.from);
      if (row.kind === 'approval' && answer.answer.choice === 'always') {
        const data = row.data as { tool: string; scope: string };
        await insertToolGrant(tx, { persona: row.persona, tool: data.tool, scope: data.scope, grantedBy: answer.by, questionId: row.id });
      }
      return answered;
    };
    const answered = options.tx ? await work(options.tx) : await db.transaction(work);
    if (answered && !options.tx) await publish('done', row.id);
    return answered;
  }

  /** The answer to an `ask_user` question arrives in the asking conversation as a framed user message. */
  async function wakeAsker(tx: Queryable, row: QuestionRow, from?: InboundEvent) {
    const text = `[answer to Q#${shortQuestionId(row.id)} "${(row.data as { question?: string } | null)?.question ?? row.text}" (${row.answeredVia} by ${row.answeredBy})]\n${row.answer!.label}`;
    const conversation = await getConversation(tx, row.conversationId);
    if (conversation?.connector && conversation.chat) {
      await insertMessage(tx, { conversationId: row.conversationId, message: { role: 'user', content: text }, sender: 'question' });
      await deps.jobs.enqueueTurn(
        {
          conversationId: row.conversationId,
          persona: row.persona,
          kind: 'user',
          // The person who answered is the sender of this turn (questions it asks are theirs to answer).
          origin: {
            connector: conversation.connector,
            chat: conversation.chat,
            // Where it was asked: a thread the bot opened for the conversation's replies, say.
            thread: (row.connector === conversation.connector && row.chat === conversation.chat ? row.thread : undefined) ?? conversation.thread ?? undefined,
            ...(from && from.connector === conversation.connector && from.chat.id === conversation.chat
              ? { chatType: from.chat.type, sender: `${from.connector}:${from.sender.id}`, ...(from.trusted ? { trusted: true } : {}) }
              : {}),
          },
        },
        tx,
      );
    } else {
      await deps.jobs.enqueueTurn({ conversationId: row.conversationId, persona: row.persona, kind: 'wake', prompt: text }, tx);
    }
  }

  const mayAnswer = (row: QuestionRow, event: InboundEvent) => mayAnswerClick(row, event, deps.personas());
  const mayAnswerTyped = (row: QuestionRow, event: InboundEvent) => mayAnswerByTyping(row, event, deps.personas());

  async function handleClick(event: InboundEvent): Promise<IngressResult> {
    const parsed = decodeChoice(event.data ?? '');
    const row = parsed && (await getQuestion(db, parsed.questionId));
    if (!parsed || !row) return { status: 'click', notice: INACTIVE };
    if (!mayAnswer(row, event)) {
      log.info({ question: row.id, sender: `${event.connector}:${event.sender.id}` }, 'click by someone who may not answer');
      return { status: 'click', notice: row.approversOnly ? 'This is not yours to approve.' : 'This question is not yours to answer.' };
    }
    const choice = row.choices.find((c) => c.id === parsed.choiceId);
    if (!choice) return { status: 'click', notice: INACTIVE };
    const answered = row.status === 'pending' ? await resolve(row, { answer: { choice: choice.id, label: choice.label, value: choice.value }, by: who(event), via: `button click on ${event.connector}:${event.chat.id}`, from: event }) : undefined;
    if (!answered) return { status: 'click', notice: closedNotice((await getQuestion(db, row.id)) ?? row) };
    log.info({ question: row.id, kind: row.kind, choice: choice.id, by: answered.answeredBy }, 'question answered');
    return { status: 'click', notice: row.kind === 'approval' ? `${choice.label}: noted.` : `Answer recorded: ${choice.label}` };
  }

  /**
   * A message in a chat with an open question may be its answer: any text for `ask_user` and choice-less
   * remote methods; a choice's number or label where the connector shows no buttons (the terminal).
   */
  /** `openedThread`: the conversation of the thread the reply was posted in, when the bot opened that thread. */
  async function answerTyped(event: InboundEvent, buttonsShown: boolean, openedThread?: string): Promise<IngressResult | undefined> {
    const text = event.text.trim();
    // Commands stay commands, and a message with files is a message.
    if (!text || text.startsWith('/') || event.attachments?.length) return undefined;
    const row = await openQuestionInChat(db, { connector: event.connector, chat: event.chat.id, thread: event.chat.thread, conversationId: openedThread });
    if (!row || !mayAnswerTyped(row, event)) return undefined;
    const picked = pickChoice(row.choices, text);
    let answer: QuestionAnswer | undefined;
    if (row.kind === 'ask' || (row.kind === 'remote' && row.choices.length === 0)) {
      answer = picked ? { choice: picked.id, label: picked.label, value: picked.value } : text ? { label: text, value: text } : undefined;
    } else if (picked && !buttonsShown) {
      answer = { choice: picked.id, label: picked.label, value: picked.value };
    }
    if (!answer) return undefined;
    const via = `via ${event.connector}:${event.chat.id}${event.messageId ? `:${event.messageId}` : ''}`;
    const answered = await db
      .transaction(async (tx) => {
        if (!(await recordInboundEvent(tx, event.connector, event.externalId))) return 'duplicate' as const;
        const resolved = await resolve(row, { answer, by: who(event), via, from: event }, { tx });
        // Answered or expired a moment ago: undo the event's record, so the message goes on as an ordinary one.
        if (!resolved) throw new NotResolved();
        return resolved;
      })
      .catch((err: unknown) => {
        if (err instanceof NotResolved) return undefined;
        throw err;
      });
    if (answered === 'duplicate') return { status: 'duplicate', conversationId: row.conversationId };
    if (!answered) return undefined;
    await publish('done', row.id);
    log.info({ question: row.id, kind: row.kind, by: answered.answeredBy }, 'question answered by a typed reply');
    return { status: 'click', conversationId: row.conversationId };
  }

  return {
    publish,
    open,
    close,
    /** Waits for the question messages being closed now. */
    closesInFlight: () => Promise.allSettled(closing.values()),
    resolve,
    handleClick,
    answerTyped,

    /**
     * `ask_user`: persisted and shown; no one waits. The answer arrives in the asking conversation as a new
     * message whenever it comes, restarts included.
     */
    async ask(
      scope: Omit<QuestionScope, 'signal'>,
      request: { question: string; choices: ChoiceSpec[]; expiresInMs: number; destination: DeliveryTarget },
    ): Promise<{ id: string; short: string }> {
      const id = newQuestionId();
      const { destination } = request;
      const sameChat = scope.origin && scope.origin.connector === destination.connector && scope.origin.chat === destination.chat;
      await open(
        {
          id,
          kind: 'ask',
          persona: scope.persona.name,
          conversationId: scope.conversationId,
          turnId: scope.turnId,
          method: 'ask_user',
          data: { question: request.question },
          text: `❓ ${request.question}`,
          choices: normalizeChoices(request.choices),
          connector: destination.connector,
          chat: destination.chat,
          thread: destination.thread,
          askedUser: sameChat && scope.kind === 'user' ? scope.origin?.sender : undefined,
          expiresAt: new Date(Date.now() + request.expiresInMs),
        },
        destination,
      );
      return { id, short: shortQuestionId(id) };
    },
  };
}
