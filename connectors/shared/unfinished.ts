// Messages cut off after some of their parts: what went out, so that a retry of the same message goes on from there.
import { createHash } from 'node:crypto';
import type { OutboundMessage } from '#src/connector.ts';

/**
 * Whether a failure of `message` after the parts that gave `ids` is final: some went out, and without a key nothing can
 * find them again, so a retry would repeat them. A keyed message is tried again, from what went out.
 */
export const cutOffForGood = (message: OutboundMessage, ids: readonly string[]): boolean => ids.length > 0 && !message.key;

/** At most this many messages are remembered; the oldest is forgotten first. */
const LIMIT = 500;

export interface UnfinishedSends {
  /**
   * The ids of the parts (steps) of `message` that went out, in order, when it is a retry (`resend`) of a keyed message
   * of `steps` steps cut off here, sent the same. A first attempt forgets what an earlier send of its key left.
   */
  resume(message: OutboundMessage, steps: number): readonly string[];
  /** The message of `steps` steps failed after the parts that gave `ids`: kept for its retry (it needs a key). */
  keep(message: OutboundMessage, ids: readonly string[], steps: number): void;
  /** The message went out whole. */
  finished(message: OutboundMessage): void;
}

/**
 * For a platform, or a kind of message, that takes no key to find it by. A retry in the same process sends only the
 * parts that are not out yet (the one that failed again, which the platform may have taken before its answer was
 * lost, as it may for a message of one part). After a crash, a process that takes the message over sends it whole.
 */
export function createUnfinishedSends(): UnfinishedSends {
  const cut = new Map<string, { sent: string; ids: readonly string[] }>();
  // What was sent: a row sent again after it failed for good may carry another text under the same key.
  const fingerprint = (message: OutboundMessage, steps: number) =>
    createHash('sha256').update(`${steps}\u0000${message.text}\u0000${(message.files ?? []).join('\u0000')}`).digest('base64url');
  return {
    resume(message, steps) {
      if (!message.key) return [];
      if (!message.resend) {
        cut.delete(message.key);
        return [];
      }
      const done = cut.get(message.key);
      return done && done.sent === fingerprint(message, steps) ? done.ids : [];
    },
    keep(message, ids, steps) {
      if (!message.key || ids.length === 0) return;
      cut.delete(message.key);
      cut.set(message.key, { sent: fingerprint(message, steps), ids: [...ids] });
      if (cut.size > LIMIT) cut.delete(cut.keys().next().value!);
    },
    finished(message) {
      if (message.key) cut.delete(message.key);
    },
  };
}
