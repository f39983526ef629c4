import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Connector, InboundEvent, IngressResult } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import type { Database, Queryable } from '#src/db/client.ts';
import { ensureConversation } from '#src/db/conversations.ts';
import { recordInboundEvent } from '#src/db/inbound-events.ts';
import { insertMessage } from '#src/db/messages.ts';
import { sentMessageText } from '#src/db/outbound-messages.ts';
import { claimSenderNotice } from '#src/db/sender-notices.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import type { Delivery } from '#src/agent/delivery.ts';
import type { Questions } from '#src/questions/service.ts';
import { parseControlCommand } from './commands.ts';
import type { CommandHandler } from './control.ts';
import { routeInbound, userMessageText } from './routing.ts';

export interface IngressDeps {
  database: Database;
  jobs: Pick<JobSystem, 'enqueueTurn'>;
  personas: () => readonly Persona[];
  delivery: Delivery;
  commands: CommandHandler;
  log: Logger;
  /** Connectors running here, for downloading attachments. */
  connectors?: ReadonlyMap<string, Connector>;
  /** Attachments larger than this are recorded but not downloaded. */
  maxDownloadBytes?: number;
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
 * The inbound pipeline: dedupe → clicks → route and authorize → control commands → persist the message and
 * enqueue its turn in one transaction. The connector acknowledges the platform only after this resolves.
 */
export function createIngress(deps: IngressDeps) {
  const { db } = deps.database;

  /** Files under the size cap are saved in the persona's workspace/uploads, so its tools can read them. */
  async function download(event: InboundEvent, persona: Persona, log: Logger) {
    const connector = deps.connectors?.get(event.connector);
    const cap = deps.maxDownloadBytes ?? 20 * 1024 * 1024;
    return Promise.all(
      (event.attachments ?? []).map(async (attachment) => {
        if (!connector?.download || !attachment.fileId || (attachment.size ?? 0) > cap) return attachment;
        try {
          const saved = await connector.download(attachment, path.join(persona.workspace, 'uploads'));
          return { ...attachment, path: path.relative(persona.workspace, saved) };
        } catch (err) {
          log.warn({ err, attachment: attachment.name ?? attachment.type }, 'attachment could not be downloaded');
          return attachment;
        }
      }),
    );
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

  async function handle(event: InboundEvent): Promise<IngressResult> {
    const log = deps.log.child({ connector: event.connector, chat: event.chat.id, event: event.externalId });
    if (event.kind === 'click') {
      return deps.questions ? deps.questions.handleClick(event) : { status: 'click', notice: 'This button is no longer active.' };
    }

    const route = routeInbound(deps.personas(), event);
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
        });
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
      await deps.delivery.deliver({
        dedupeKey: `command:${event.connector}:${event.externalId}`,
        conversationId,
        connector: event.connector,
        chat: event.chat.id,
        thread: event.chat.thread,
        replyTo: event.chat.type === 'group' ? event.messageId : undefined,
        text: reply,
      });
      return { status: 'command', conversationId };
    }

    if (deps.questions && event.kind === 'message') {
      // A reply in a chat with an open question may be its answer.
      const answered = await deps.questions.answerTyped(event, deps.connectors?.get(event.connector)?.capabilities.buttons ?? true);
      if (answered) return answered;
    }
    if (event.attachments?.length) event = { ...event, attachments: await download(event, persona, log) };
    const queued = await onFirstDelivery(db, event, async (tx) => {
      await ensureConversation(tx, {
        id: conversationId,
        persona: persona.name,
        connector: event.connector,
        chat: event.chat.id,
        thread: event.chat.thread,
      });
      await insertMessage(tx, {
        conversationId,
        message: { role: 'user', content: userMessageText(event), ...(event.attachments?.length ? { attachments: event.attachments } : {}) },
        sender: `${event.connector}:${event.sender.id}`,
        externalId: event.messageId,
      });
      await deps.jobs.enqueueTurn(
        {
          conversationId,
          persona: persona.name,
          kind: 'user',
          origin: {
            connector: event.connector,
            chat: event.chat.id,
            thread: event.chat.thread,
            messageId: event.messageId,
            chatType: event.chat.type,
            sender: `${event.connector}:${event.sender.id}`,
          },
        },
        tx,
      );
      return true;
    });
    if (!queued) return { status: 'duplicate', conversationId };
    log.debug({ conversation: conversationId }, 'message queued');
    return { status: 'queued', conversationId };
  }

  return { handle };
}

