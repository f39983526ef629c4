// Messages cut off after some of their parts: what went out, so that a retry of the same message goes on from there.
import type { OutboundMessage } from '#src/connector.ts';

/** At most this many messages are remembered; the oldest is forgotten first. */
const LIMIT = 500;

export interface UnfinishedSends {
  /** For a retry (`resend`) of a keyed message cut off here: the steps done and their ids. Else none. */
  resume(message: OutboundMessage): { steps: number; ids: readonly string[] };
  /** The message failed after `steps` steps, which gave `ids`: kept for its retry. Says whether it was (it needs a key). */
  keep(message: OutboundMessage, ids: readonly string[], steps: number): boolean;
  /** The message went out whole. */
  finished(message: OutboundMessage): void;
}

/**
 * For a platform that takes no key to find a message by. A retry in the same process sends only the parts that are
 * not out yet (the one that failed again, which the platform may have taken before its answer was lost, as it may
 * for a message of one part). After a crash, a process that takes the message over sends it whole.
 */
export function createUnfinishedSends(): UnfinishedSends {
  const cut = new Map<string, { steps: number; ids: readonly string[] }>();
  return {
    resume(message) {
      const done = message.key && message.resend ? cut.get(message.key) : undefined;
      return done ?? { steps: 0, ids: [] };
    },
    keep(message, ids, steps) {
      if (!message.key || steps === 0) return false;
      cut.delete(message.key);
      cut.set(message.key, { steps, ids: [...ids] });
      if (cut.size > LIMIT) cut.delete(cut.keys().next().value!);
      return true;
    },
    finished(message) {
      if (message.key) cut.delete(message.key);
    },
  };
}
