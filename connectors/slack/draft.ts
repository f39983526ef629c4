import type { Logger } from 'pino';
import type { DraftTarget, EditLimits, OutboundMessage, ReplyDraft, SentMessage } from '#src/connector.ts';
import { createFramePacer } from '../shared/frame-pacer.ts';
import { formatForSlack, TEXT_LIMIT } from './format.ts';

/**
 * How often the bot edits one message: chat.update is in Slack's Tier 3 (about 50 calls a minute for the app) and a
 * channel takes about one message a second, shared by everyone posting there: one edit every 1.5 s in a DM, every
 * 3 s in a channel. A 429 holds the next edit for its Retry-After.
 */
export const EDIT_LIMITS: EditLimits = { perMinute: { dm: 40, group: 20 } };

/** The calls a draft makes, as the connector makes them (channel resolved, errors as PlatformErrors). */
export interface DraftCalls {
  post(text: string): Promise<string>;
  update(ts: string, text: string): Promise<void>;
  /** The connector's send, for what does not fit the draft's message. */
  send(message: OutboundMessage): Promise<SentMessage>;
  /** How long Slack asked to wait after this error (a 429), if it did. */
  retryAfterMs(err: unknown): number | undefined;
  /** The message is gone (deleted): a new one takes its place. */
  isGone(err: unknown): boolean;
}

/**
 * A streamed reply on Slack: the first words are posted, later text replaces them by chat.update (paced, the newest
 * text winning), and `finish` writes the final text in, continuing in new messages past 4,000 characters.
 */
export function createSlackDraft(deps: { target: DraftTarget; group: boolean; calls: DraftCalls; log: Logger }): ReplyDraft {
  const { target, calls } = deps;
  const interval = 60_000 / (deps.group ? EDIT_LIMITS.perMinute.group : EDIT_LIMITS.perMinute.dm);
  let ts: string | undefined = target.resume && /^\d+\.\d+$/.test(target.resume) ? target.resume : undefined;
  let holdUntil = 0;

  /** What a draft shows of a text longer than one message: its start, marked as going on. */
  const fit = (text: string) => (text.length > TEXT_LIMIT - 2 ? `${text.slice(0, TEXT_LIMIT - 2)} …` : text);

  /** One frame: the first posts the message, later ones edit it. */
  async function show(text: string): Promise<boolean> {
    const [part] = formatForSlack(fit(text));
    if (!part) return false;
    try {
      if (ts === undefined) {
        ts = await calls.post(part.mrkdwn);
        target.onShown?.(ts);
      } else {
        await calls.update(ts, part.mrkdwn);
      }
      return true;
    } catch (err) {
      if (calls.isGone(err)) ts = undefined;
      const wait = calls.retryAfterMs(err);
      if (wait) holdUntil = Date.now() + wait;
      // A frame that fails is only a missed frame: the next one, or the final text, takes its place.
      deps.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'draft update failed');
      return false;
    }
  }

  const pacer = createFramePacer({ intervalMs: interval, holdUntil: () => holdUntil, frame: show, beforeFrame: target.beforeWrite });

  return {
    update: (text) => pacer.update(text),
    async finish(text) {
      await pacer.stop();
      await target.beforeWrite?.();
      const whole = () => calls.send({ chat: target.chat, thread: target.thread, replyTo: target.replyTo, text });
      if (ts === undefined) return whole();
      const [first, ...rest] = formatForSlack(text);
      const wait = holdUntil - Date.now();
      if (wait > 0) {
        await new Promise((r) => setTimeout(r, wait));
        await target.beforeWrite?.();
      }
      if (first) {
        try {
          await calls.update(ts, first.mrkdwn);
        } catch (err) {
          if (!calls.isGone(err)) throw err;
          return whole();
        }
      }
      const ids = [ts];
      let thread: string | undefined;
      if (rest.length) {
        // The rest goes as new messages, from the Markdown it was cut from (it splits the same way again).
        const more = await calls.send({ chat: target.chat, thread: target.thread, text: rest.map((p) => p.source).join('\n\n') });
        ids.push(...more.ids);
        thread = more.thread;
      }
      return { ids, ...(target.thread || thread ? { thread: target.thread ?? thread } : {}) };
    },
  };
}
