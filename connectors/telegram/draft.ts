import { GrammyError, type Api } from 'grammy';
import type { Logger } from 'pino';
import type { DraftTarget, EditLimits, OutboundMessage, ReplyDraft, SentMessage } from '#src/connector.ts';
import { createFramePacer } from '../shared/frame-pacer.ts';
import { formatForTelegram, TEXT_LIMIT } from './format.ts';

/**
 * Edits of one message Telegram tolerates a minute: about one a second in a private chat; in groups, where it allows
 * twenty messages a minute, one every three seconds. A 429 waits out its retry_after before the next edit.
 */
export const EDIT_LIMITS: EditLimits = { perMinute: { dm: 60, group: 20 } };

/**
 * A streamed reply on Telegram: the first text is sent as a message, later text edits it (paced, the latest text
 * winning), and `finish` edits in the final text, continuing in new messages past 4,096 characters.
 */
export function createTelegramDraft(deps: {
  api: Api;
  log: Logger;
  target: DraftTarget;
  /** The connector's own send, for what does not fit the draft message. */
  send(message: OutboundMessage): Promise<SentMessage>;
  /** Waits for the chat's share of Telegram's flood limits before a new message. */
  take(chat: string): Promise<void>;
}): ReplyDraft {
  const { api, target } = deps;
  const interval = 60_000 / (target.chat.startsWith('-') ? EDIT_LIMITS.perMinute.group : EDIT_LIMITS.perMinute.dm);
  // A draft a crashed run left behind is written over, not left half-finished beside a new one.
  let messageId: number | undefined = target.resume !== undefined && /^\d+$/.test(target.resume) ? Number(target.resume) : undefined;
  let holdUntil = 0;

  const common = () => ({
    ...(target.thread ? { message_thread_id: Number(target.thread) } : {}),
  });

  /** What a draft shows of a text longer than one message: its first part, marked as going on. */
  const fit = (text: string) => (text.length > TEXT_LIMIT - 2 ? `${text.slice(0, TEXT_LIMIT - 2)} …` : text);

  /** One frame: the first sends the message, later ones edit it. */
  async function show(text: string): Promise<boolean> {
    const [part] = formatForTelegram(fit(text));
    if (!part) return false;
    try {
      if (messageId === undefined) {
        await deps.take(target.chat);
        pacer.began();
        const sent = await sendPart(part, {
          ...common(),
          ...(target.replyTo ? { reply_parameters: { message_id: Number(target.replyTo), allow_sending_without_reply: true } } : {}),
        });
        messageId = sent.message_id;
        target.onShown?.(String(messageId));
      } else {
        await editPart(messageId, part);
      }
      return true;
    } catch (err) {
      // The message it was writing in is gone (deleted, or a crashed run's that cannot be found): start a new one.
      if (isGone(err)) messageId = undefined;
      const retryAfter = err instanceof GrammyError ? err.parameters?.retry_after : undefined;
      if (retryAfter) holdUntil = Date.now() + retryAfter * 1000;
      // A draft update that fails is only a missed frame: the next one, or the final text, takes its place.
      deps.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'draft update failed');
      return false;
    }
  }

  async function sendPart(part: { html: string; plain: string }, extra: object) {
    try {
      return await api.sendMessage(target.chat, part.html, { ...extra, parse_mode: 'HTML' });
    } catch (err) {
      if (!(err instanceof GrammyError && /can't parse entities/i.test(err.description))) throw err;
      return api.sendMessage(target.chat, part.plain, extra);
    }
  }

  async function editPart(id: number, part: { html: string; plain: string }) {
    try {
      try {
        await api.editMessageText(target.chat, id, part.html, { parse_mode: 'HTML' });
      } catch (err) {
        if (!(err instanceof GrammyError && /can't parse entities/i.test(err.description))) throw err;
        await api.editMessageText(target.chat, id, part.plain);
      }
    } catch (err) {
      if (err instanceof GrammyError && /message is not modified/i.test(err.description)) return;
      throw err;
    }
  }

  const pacer = createFramePacer({ intervalMs: interval, holdUntil: () => holdUntil, frame: show, beforeFrame: target.beforeWrite });

  return {
    update: (text) => pacer.update(text),
    async finish(text) {
      await pacer.stop();
      await target.beforeWrite?.();
      const parts = formatForTelegram(text);
      if (messageId === undefined) return deps.send({ chat: target.chat, thread: target.thread, replyTo: target.replyTo, text });
      const ids = [String(messageId)];
      // The first part takes the draft's place; the rest follows as new messages, in order.
      const [first, ...rest] = parts;
      if (first) {
        const wait = holdUntil - Date.now();
        if (wait > 0) {
          await new Promise((r) => setTimeout(r, wait));
          await target.beforeWrite?.();
        }
        try {
          await editPart(messageId, first);
        } catch (err) {
          if (!isGone(err)) throw err;
          return deps.send({ chat: target.chat, thread: target.thread, replyTo: target.replyTo, text });
        }
      }
      if (rest.length) {
        const more = await deps.send({ chat: target.chat, thread: target.thread, text: rest.map((p) => p.plain).join('\n\n') });
        ids.push(...more.ids);
      }
      return { ids };
    },
  };
}

/** Telegram no longer has the message being edited. */
function isGone(err: unknown): boolean {
  return err instanceof GrammyError && /message to edit not found|message can't be edited/i.test(err.description);
}
