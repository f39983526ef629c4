// A streamed reply on Discord: the first words are sent as a message, later text edits it (paced, the newest text
// winning), and `finish` edits in the final text, continuing in new messages past 2000 characters.
import type { DraftTarget, EditLimits, ReplyDraft, SentMessage } from '#src/connector.ts';
import { createFramePacer } from '../shared/frame-pacer.ts';
import { TEXT_LIMIT } from './format.ts';

/**
 * Discord allows about 5 requests per 5 s on a channel's messages, sends and edits together, and never limits how
 * long after sending a message may be edited. A draft edits at most every 1.5 s, leaving room for the chat's other
 * messages; discord.js waits out a 429 if one comes anyway.
 */
export const EDIT_LIMITS: EditLimits = { perMinute: { dm: 40, group: 40 } };

export interface DraftDeps {
  target: DraftTarget;
  /** Posts one part (the draft's first frame) and returns its id. */
  post(text: string, replyTo?: string): Promise<string>;
  /** Replaces a message's text; throws a `gone` error when the message no longer exists. */
  edit(messageId: string, text: string): Promise<void>;
  /** Sends the rest of a long answer as new messages. */
  send(text: string, replyTo?: string): Promise<SentMessage>;
  /** The message was deleted (or never existed). */
  isGone(err: unknown): boolean;
  /** The Markdown as Discord's first part of it. */
  firstPart(text: string): { first: string; rest: string };
  onError(err: unknown): void;
}

export function createDiscordDraft(deps: DraftDeps): ReplyDraft {
  const { target } = deps;
  const interval = 60_000 / EDIT_LIMITS.perMinute.dm;
  // A draft a crashed run left behind is written over, not left half-finished beside a new one.
  let messageId: string | undefined = target.resume && /^\d+$/.test(target.resume) ? target.resume : undefined;

  /** What a draft shows of a text longer than one message: its first part, marked as going on. */
  const fit = (text: string) => {
    const { first, rest } = deps.firstPart(text);
    return rest ? `${first.slice(0, TEXT_LIMIT - 2)} …` : first;
  };

  /** One frame: the first posts the message, later ones edit it. */
  async function show(text: string): Promise<boolean> {
    const frame = fit(text);
    if (!frame.trim()) return false;
    try {
      if (messageId === undefined) {
        messageId = await deps.post(frame, target.replyTo);
        target.onShown?.(messageId);
      } else {
        await deps.edit(messageId, frame);
      }
      return true;
    } catch (err) {
      if (deps.isGone(err)) messageId = undefined;
      // A frame that fails is only a missed frame: the next one, or the final text, takes its place.
      deps.onError(err);
      return false;
    }
  }

  const pacer = createFramePacer({ intervalMs: interval, frame: show, beforeFrame: target.beforeWrite });

  return {
    update: (text) => pacer.update(text),
    async finish(text) {
      await pacer.stop();
      await target.beforeWrite?.();
      if (messageId === undefined) return deps.send(text, target.replyTo);
      const { first, rest } = deps.firstPart(text);
      try {
        await deps.edit(messageId, first);
      } catch (err) {
        if (!deps.isGone(err)) throw err;
        return deps.send(text, target.replyTo);
      }
      const ids = [messageId];
      if (rest.trim()) ids.push(...(await deps.send(rest)).ids);
      return { ids };
    },
  };
}
