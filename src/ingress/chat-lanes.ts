// A chat's events stored in the order they came into this process: one waits while the chat's earlier event is still
// being stored (waiting for the database, say), so that a message the database could not take at once is not
// overtaken by the chat's next one.
import type { InboundEvent } from '#src/connector.ts';
import { sleep } from '#src/retry.ts';

/**
 * The longest an event waits behind its chat's earlier one: past the ingress's own wait for the database. An earlier
 * store left hanging (a statement on a connection that died without a word) holds its chat up no longer.
 */
export const LANE_WAIT_MS = 30_000;
/**
 * How long a chat is held for its event whose store failed for a passing reason (the database still away), so that
 * the event's next attempt (its connector's, or its platform's) comes before the chat's later events.
 */
export const RETRY_GRACE_MS = 5_000;

interface Place {
  /** Settles once the event's first attempt has stopped waiting behind its chat. */
  started: Promise<void>;
  /** The first attempt is storing it, or it failed for a passing reason and the chat is held for the next. */
  state: 'storing' | 'held';
  /** Lets the chat's later events go (and forgets the place). */
  release(): void;
  /** Holds the chat a while (RETRY_GRACE_MS) for the event's next attempt. */
  hold(): void;
}

export function createChatLanes(options: { waitMs?: number; retryGraceMs?: number; heldFor?: (err: unknown) => boolean } = {}) {
  const { waitMs = LANE_WAIT_MS, retryGraceMs = RETRY_GRACE_MS, heldFor = () => false } = options;
  /** Per chat: settles once its latest event so far is settled. */
  const tails = new Map<string, Promise<void>>();
  /** Per event being stored, or held for its next attempt. */
  const places = new Map<string, Place>();

  /** A first attempt: last in its chat's lane, it waits for the chat's earlier event (at most `waitMs`). */
  async function first<T>(chat: string, key: string, store: () => Promise<T>): Promise<T> {
    const earlier = tails.get(chat);
    let settle!: () => void;
    let start!: () => void;
    const mine = new Promise<void>((resolve) => (settle = resolve));
    let grace: NodeJS.Timeout | undefined;
    const place: Place = {
      started: new Promise<void>((resolve) => (start = resolve)),
      state: 'storing',
      release() {
        clearTimeout(grace);
        settle();
        if (places.get(key) === place) places.delete(key);
        if (tails.get(chat) === mine) tails.delete(chat);
      },
      hold() {
        place.state = 'held';
        clearTimeout(grace);
        grace = setTimeout(() => place.release(), retryGraceMs);
        grace.unref();
      },
    };
    tails.set(chat, mine);
    places.set(key, place);
    if (earlier) {
      const bound = new AbortController();
      await Promise.race([earlier, sleep(waitMs, bound.signal)]);
      bound.abort();
    }
    start();
    try {
      const result = await store();
      place.release();
      return result;
    } catch (err) {
      if (heldFor(err)) place.hold();
      else place.release();
      throw err;
    }
  }

  /** Another attempt of an event in the lane: once the event has its turn, beside its first attempt. */
  async function again<T>(place: Place, store: () => Promise<T>): Promise<T> {
    await place.started;
    try {
      const result = await store();
      place.release();
      return result;
    } catch (err) {
      // While the first attempt still runs, its end decides; held for a next attempt, this one was it.
      if (place.state === 'held') {
        if (heldFor(err)) place.hold();
        else place.release();
      }
      throw err;
    }
  }

  return {
    /**
     * `store` run once the chat's earlier events are settled (stored, given up on, or not tried again within
     * RETRY_GRACE_MS of a passing failure). Another attempt of an event in the lane (its keeper trying again beside a
     * store that hangs, its platform sending it again) runs once that event has its turn, beside its first attempt,
     * and what it stores lets the chat's later events go.
     */
    inOrder<T>(event: InboundEvent, store: () => Promise<T>): Promise<T> {
      const key = `${event.connector}\0${event.externalId}`;
      const place = places.get(key);
      return place ? again(place, store) : first(`${event.connector}\0${event.chat.id}\0${event.chat.thread ?? ''}`, key, store);
    },
  };
}
