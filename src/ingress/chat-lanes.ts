// A chat's events stored in the order they came into this process: one waits while the chat's earlier event is still
// being stored (waiting for the database, say), so that a message the database could not take at once is not
// overtaken by the chat's next one.
import type { InboundEvent } from '#src/connector.ts';
import { sleep } from '#src/retry.ts';

/**
 * The longest an event waits behind its chat's earlier one: past the ingress's own wait for the database. An earlier
 * store left hanging (a statement on a connection that died without a word) holds its chat up no longer.
 */
export const LANE_WAIT_MS = 25_000;

export function createChatLanes(waitMs = LANE_WAIT_MS) {
  /** Per chat: settles once its latest event so far is settled. */
  const tails = new Map<string, Promise<void>>();
  /** Per event being stored: settles its place in its chat's lane. */
  const places = new Map<string, () => void>();

  return {
    /**
     * `store` run once the chat's earlier events are settled (stored, or given up on). Another attempt of an event
     * whose store is still under way (its keeper trying again beside a store that hangs) runs at once, beside it,
     * and what it stores lets the chat's later events go.
     */
    async inOrder<T>(event: InboundEvent, store: () => Promise<T>): Promise<T> {
      const chat = `${event.connector}\0${event.chat.id}\0${event.chat.thread ?? ''}`;
      const key = `${event.connector}\0${event.externalId}`;
      const under = places.get(key);
      if (under) {
        const result = await store();
        under();
        return result;
      }
      const earlier = tails.get(chat);
      let settle!: () => void;
      const mine = new Promise<void>((resolve) => (settle = resolve));
      tails.set(chat, mine);
      places.set(key, settle);
      try {
        if (earlier) {
          const bound = new AbortController();
          await Promise.race([earlier, sleep(waitMs, bound.signal)]);
          bound.abort();
        }
        return await store();
      } finally {
        settle();
        if (places.get(key) === settle) places.delete(key);
        if (tails.get(chat) === mine) tails.delete(chat);
      }
    },
  };
}
