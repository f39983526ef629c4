import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import type { Connector, InboundEvent, IngressResult } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import { inOneTrip, type Database, type Queryable } from '#src/db/client.ts';
import { conversationOfThread } from '#src/db/conversation-threads.ts';
import { ensureConversation } from '#src/db/conversations.ts';
import { recordInboundEvent, storeInboundMessage, type StoredInbound } from '#src/db/inbound-events.ts';
import { insertMessage } from '#src/db/messages.ts';
import { sentMessageText } from '#src/db/outbound-messages.ts';
import { claimSenderNotice } from '#src/db/sender-notices.ts';
import { databaseUnavailable, waitForDatabase } from '#src/db/unavailable.ts';
import { sleep } from '#src/retry.ts';
import type { Delivery } from '#src/agent/delivery.ts';
import type { Questions } from '#src/questions/service.ts';
import { inboundUserMessage } from './attachment-text.ts';
import { parseControlCommand } from './commands.ts';
import type { CommandHandler } from './control.ts';
import { createDeadLetters, isTransientStoreError } from './dead-letters.ts';
import { createAttachmentDownloads } from './downloads.ts';
import { routeInbound } from './routing.ts';
import { sanitizeEvent } from './sanitize.ts';
import { createChatLanes } from './chat-lanes.ts';
import type { TurnJobData } from '#src/turns.ts';
import type { HeldPlace } from '#src/jobs/workers.ts';
import type { BegunTurn } from '#src/agent/turn-runner.ts';

export interface IngressDeps {
  database: Database;
  /** A message's turn job was committed (this process's workers may fetch it at once, before its notification). */
  queued?: (conversationId: string, jobId: string, data: TurnJobData) => void;
  /** A turn job is about to be stored (its notification may come back before the commit is confirmed). */
  storing?: (jobId: string) => void;
  /** A place for the turn in this process, its start going out behind the transaction that stores the message (see TurnWorkers.hold). */
  hold?: (conversationId: string, jobId: string, data: TurnJobData) => HeldPlace | undefined;
  personas: () => readonly Persona[];
  delivery: Delivery;
  commands: CommandHandler;
  log: Logger;
  /** Connectors running here, for downloading attachments (after the commit, see downloads.ts). */
  connectors?: ReadonlyMap<string, Connector>;
  /** Attachments larger than this are recorded but not downloaded. */
  maxDownloadBytes?: number;
  /** The most a persona's workspace/uploads may hold (default 500 MB); past it, files are not downloaded. */
  uploadCapBytes?: number;
  /** Button clicks and typed answers go straight to the questions module; they never queue behind a turn. */
  questions?: Pick<Questions, 'handleClick' | 'answerTyped'>;
}

class Duplicate extends Error {}

/**
 * Records the event and runs `fn` in the same transaction; undefined (and nothing written) when the platform
 * delivered this event before.
 */
async function onFirstDelivery<T>(
  db: Database['db'],
  event: InboundEvent,
  fn: (tx: Queryable) => Promise<T>,
): Promise<T | undefined> {
  return db
    .transaction(async (tx) => {
      if (!(await recordInboundEvent(tx, event.connector, event.externalId))) throw new Duplicate();
      return fn(tx);
    })
    .catch((err: unknown) => {
      if (err instanceof Duplicate) return undefined;
      throw err;
    });
}

/** How long the persona remembers its sent messages for reactions to them. */
const REACTION_MEMORY_DAYS = 7;

/**
 * How long a click or a message that comes while the database is away waits for it (a restart takes seconds), a
 * message's chat's later events waiting behind it (see createChatLanes).
 */
const DATABASE_WAIT_MS = 20_000;

/**
 * The inbound pipeline: sanitize → clicks → route and authorize → control commands → dedupe, persist the message
 * and enqueue its turn in one transaction → fetch its attachments in the background. The connector acknowledges
 * the platform only after this resolves; an event that keeps failing to store is dead-lettered instead.
 */
export function createIngress(deps: IngressDeps) {
  const { db } = deps.database;

  const downloads = createAttachmentDownloads({
    database: deps.database,
    connectors: deps.connectors,
    log: deps.log,
    maxFileBytes: deps.maxDownloadBytes,
    uploadCapBytes: deps.uploadCapBytes,
  });
  const onStoreFailure = createDeadLetters({ db, log: deps.log });
  let stopped = false;

  // A chat is held a moment for an event that failed for a passing reason, so that its next attempt comes first.
  const lanes = createChatLanes({ heldFor: isTransientStoreError });

  /**
   * `attempt` once more when the database is away, once it is back (within DATABASE_WAIT_MS). A click is a person's
   * decision, made once: one made while the database restarts is recorded when it is back, instead of asking them to
   * click again; trying again is safe, as a question already answered by the try that failed on its way back says so.
   * A message that failed so was left to its platform to send again, which came after the chat's next message (stored
   * at once, the database back by then) and was answered after it; trying again is safe, as its event is stored once.
   */
  async function whileDatabaseAway(event: InboundEvent, attempt: () => Promise<IngressResult>): Promise<IngressResult> {
    const until = Date.now() + DATABASE_WAIT_MS;
    for (let pause = 250; ; pause = Math.min(pause * 2, 2000)) {
      try {
        return await attempt();
      } catch (err) {
        const left = until - Date.now() - pause;
        if (stopped || left <= 0 || !databaseUnavailable(err)) throw err;
        deps.log.warn({ err: (err as Error).message, connector: event.connector, kind: event.kind }, 'an event waits for the database');
        await sleep(pause);
        if (!(await waitForDatabase(deps.database.sql, { withinMs: left, stop: () => stopped }))) throw err;
      }
    }
  }

  /**
   * A reaction to one of the persona's recent messages goes into the transcript (the next turn sees it) without
   * starting a turn. Reactions to anything else are ignored.
   */
  async function recordReaction(event: InboundEvent, persona: Persona, conversationId: string, log: Logger): Promise<IngressResult> {
    if (!event.messageId || !event.text) return { status: 'ignored' };
    const reactedTo = await sentMessageText(db, {
      connector: event.connector,
      chat: event.chat.id,
      platformMessageId: event.messageId,
      withinDays: REACTION_MEMORY_DAYS,
    });
    if (reactedTo === undefined) return { status: 'ignored' };
    const recorded = await onFirstDelivery(db, event, async (tx) => {
      await ensureConversation(tx, { id: conversationId, persona: persona.name, connector: event.connector, chat: event.chat.id, thread: event.chat.thread });
      const who = event.sender.name ?? event.sender.id;
      const excerpt = reactedTo.length > 80 ? `${reactedTo.slice(0, 80)}…` : reactedTo;
      await insertMessage(tx, {
        conversationId,
        // Written as already read, so it waits for the next turn instead of starting one.
        turnId: randomUUID(),
        message: { role: 'user', content: `[${who} reacted ${event.text} to your message "${excerpt}"]` },
        sender: `${event.connector}:${event.sender.id}`,
      });
      return true;
    });
    if (!recorded) return { status: 'duplicate', conversationId };
    log.debug({ conversation: conversationId }, 'reaction recorded');
    return { status: 'ignored', conversationId };
  }

  async function accept(event: InboundEvent): Promise<IngressResult> {
    // Only a local connector may name the persona or vouch for its sender; from anywhere else those are dropped.
    if ((event.trusted || event.persona) && !deps.connectors?.get(event.connector)?.local) event = { ...event, trusted: undefined, persona: undefined };
    const log = deps.log.child({ connector: event.connector, chat: event.chat.id, event: event.externalId });
    if (event.kind === 'click') {
      return deps.questions ? deps.questions.handleClick(event) : { status: 'click', notice: 'This button is no longer active.' };
    }

    // Posted in a thread the bot opened for a reply: it continues that reply's conversation.
    const openedThread =
      event.chat.type === 'group' && event.chat.thread
        ? await conversationOfThread(db, { connector: event.connector, chat: event.chat.id, thread: event.chat.thread })
        : undefined;
    const route = routeInbound(deps.personas(), event, openedThread);
    if (route.kind === 'ignore') {
      log.debug({ reason: route.reason }, 'inbound ignored');
      return { status: 'ignored' };
    }

    if (route.kind === 'stranger' && event.kind === 'reaction') return { status: 'ignored' };
    if (route.kind === 'stranger') {
      const notify = await onFirstDelivery(db, event, (tx) => claimSenderNotice(tx, event.connector, event.sender.id));
      if (notify === undefined) return { status: 'duplicate' };
      log.info({ sender: route.address }, 'message from an unknown sender refused');
      if (notify) {
        await deps.delivery.deliver({
          dedupeKey: `stranger:${event.connector}:${event.externalId}`,
          connector: event.connector,
          chat: event.chat.id,
          thread: event.chat.thread,
          text: `Hi! I only talk to people my owner has allowed. Ask them to add ${route.address} to "users" in my connectors.jsonc.`,
        }, { later: true });
      }
      return { status: 'refused' };
    }

    const { persona, conversationId } = route;
    if (event.kind === 'reaction') return recordReaction(event, persona, conversationId, log);
    const command = event.kind === 'message' ? parseControlCommand(event.text) : undefined;
    if (command) {
      const fresh = await recordInboundEvent(db, event.connector, event.externalId);
      if (!fresh) return { status: 'duplicate', conversationId };
      const reply = await deps.commands.run(command, { persona, conversationId, event });
      const group = event.chat.type === 'group';
      await deps.delivery.deliver({
        dedupeKey: `command:${event.connector}:${event.externalId}`,
        conversationId,
        connector: event.connector,
        chat: event.chat.id,
        thread: event.chat.thread,
        replyTo: group ? event.messageId : undefined,
        text: reply.text,
        ...(group && reply.personal ? { privateTo: event.sender.id } : {}),
        // Written to the outbox, not sent here: the update loop never waits on a chat's rate limit.
      }, { later: true });
      return { status: 'command', conversationId };
    }

    // Files are fetched once the message is committed (see below), never while the platform waits for an answer.
    const attachments = downloads.prepare(event.connector, event.attachments ?? []);
    const origin = {
      connector: event.connector,
      chat: event.chat.id,
      thread: event.chat.thread,
      messageId: event.messageId,
      chatType: event.chat.type,
      sender: `${event.connector}:${event.sender.id}`,
      ...(event.trusted ? { trusted: true } : {}),
    };
    // The message, its event and its turn's job in one statement (the job written only with the message: a redelivery,
    // or a possible answer, leaves none), sent together with its BEGIN and COMMIT; with a place free for it here, the
    // turn's start follows the COMMIT in the same write (a statement of its own, as the turn would run it, so that
    // nothing it does can undo the message), and the turn begins one round trip sooner.
    const store = async (unlessQuestionIn?: { thread?: string; conversationId?: string }) => {
      const jobId = randomUUID();
      const data: TurnJobData = { conversationId, persona: persona.name, kind: 'user', origin };
      deps.storing?.(jobId);
      const place = deps.hold?.(conversationId, jobId, data);
      let begun: Promise<BegunTurn> | undefined;
      let stored: StoredInbound;
      try {
        [stored] = await inOneTrip<[StoredInbound]>(
          deps.database.sql,
          async (c) => [
            storeInboundMessage(c, {
              connector: event.connector,
              externalId: event.externalId,
              conversation: { id: conversationId, persona: persona.name, chat: event.chat.id, thread: event.chat.thread },
              message: inboundUserMessage(event, attachments),
              sender: origin.sender,
              messageId: event.messageId,
              unlessQuestionIn,
              job: { id: jobId, data },
              // Its start, right behind, takes it here; the workers announce it if that start cannot.
              announce: !place,
            }),
          ] as const,
          place && ((c) => (begun = place.statement(c))),
        );
      } catch (err) {
        // Whether the COMMIT took is not known (a connection lost on the way back): the turn finds out, as a turn whose
        // start failed does, and runs if there is something to run.
        if (place && begun) place.run(begun);
        else place?.drop();
        throw err;
      }
      // Stored, its turn runs here (not stored, there is no job for its start to take).
      if (place && begun && stored === 'stored') {
        place.run(begun);
        return stored;
      }
      place?.drop();
      if (stored === 'stored') deps.queued?.(conversationId, jobId, data);
      return stored;
    };
    const mayAnswer = !!deps.questions && event.kind === 'message';
    let stored = await store(mayAnswer ? { thread: event.chat.thread, conversationId: openedThread } : undefined);
    if (stored === 'question open') {
      // A reply in a chat with an open question may be its answer.
      const answered = await deps.questions!.answerTyped(event, deps.connectors?.get(event.connector)?.capabilities.buttons ?? true, openedThread);
      if (answered) return answered;
      stored = await store();
    }
    const queued = stored === 'stored';
    if (!queued) return { status: 'duplicate', conversationId };
    downloads.start(conversationId, persona, event.connector, attachments);
    log.debug({ conversation: conversationId }, 'message queued');
    return { status: 'queued', conversationId };
  }

  return {
    /**
     * Every string of the event is made storable first (platforms pass NUL and broken UTF-16 through); an event
     * that still cannot be stored is retried by its platform a few times, then dead-lettered.
     */
    async handle(event: InboundEvent): Promise<IngressResult> {
      const clean = sanitizeEvent(event);
      const store = async () => {
        try {
          return await whileDatabaseAway(clean, () => accept(clean));
        } catch (err) {
          return onStoreFailure(clean, err, event);
        }
      };
      // A chat's messages are stored in the order they came; a click or a control command (/stop) never waits behind them.
      const atOnce = clean.kind === 'click' || (clean.kind === 'message' && parseControlCommand(clean.text) !== undefined);
      return atOnce ? store() : lanes.inOrder(clean, store);
    },
    /** Starts no more downloads and lets running ones finish for a moment (the turns settle the rest). */
    stop: () => {
      stopped = true;
      return downloads.stop();
    },
  };
}

