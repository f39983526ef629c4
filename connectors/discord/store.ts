// Handing gateway events to the core. Discord never delivers a gateway event again (there is nothing to
// acknowledge), so an event the core could not store at once is kept on disk (the core's EventKeeper: a process killed
// meanwhile stores it at its next start) and tried again here; events of one channel go in the order they came, each
// channel on its own, so a slow chat holds up nobody else's.
import type { Logger } from 'pino';
import type { InboundEvent, IngressResult } from '#src/connector.ts';
import { settledWithin, sleep, STALLED } from '#src/retry.ts';
import { ATTEMPT_STALL_MS } from '../shared/ack.ts';

/** How long an event that cannot be stored is tried for before it is given up (and logged as lost). */
const RETRY_FOR_MS = 10 * 60_000;

export function storeInOrder(options: {
  log: Logger;
  signal: AbortSignal;
  /** Keeps an event on disk until it is stored (see EventKeeper); undefined when there is nowhere to keep it. */
  keep?: (event: InboundEvent) => Promise<(() => Promise<void>) | undefined>;
  retryForMs?: number;
  firstRetryMs?: number;
  stallMs?: number;
}) {
  const chains = new Map<string, Promise<void>>();

  async function store(event: InboundEvent, handle: (event: InboundEvent) => Promise<IngressResult>) {
    const giveUpAt = Date.now() + (options.retryForMs ?? RETRY_FOR_MS);
    let delay = options.firstRetryMs ?? 500;
    let attempt = handle(event);
    let kept: Promise<(() => Promise<void>) | undefined> | undefined;
    // Once, when the first try did not store it: the tries that follow may outlast this process.
    const keep = () =>
      (kept ??= (options.keep?.(event) ?? Promise.resolve(undefined)).catch((err: unknown) => {
        options.log.warn({ err, event: event.externalId }, 'a Discord event not stored yet could not be kept on disk; it is tried here only');
        return undefined;
      }));
    for (;;) {
      try {
        if ((await settledWithin(attempt, options.stallMs ?? ATTEMPT_STALL_MS)) !== STALLED) {
          await (await kept)?.();
          return;
        }
        await keep();
        if (options.signal.aborted || Date.now() > giveUpAt) throw new Error('storing it never finished');
        options.log.warn({ event: event.externalId }, 'storing a Discord event has not finished; trying again beside it');
        attempt = handle(event);
      } catch (err) {
        const onDisk = !!(await keep());
        if (options.signal.aborted || Date.now() + delay > giveUpAt) {
          const fate = onDisk ? 'it stays on disk and is stored later' : 'Discord will not send it again; it is lost';
          options.log.error({ err, event: event.externalId }, `a Discord event could not be stored; ${fate}`);
          return;
        }
        options.log.warn({ err, event: event.externalId, retryInMs: delay }, 'a Discord event could not be stored yet; trying again');
        await sleep(delay, options.signal);
        delay = Math.min(delay * 2, 30_000);
        attempt = handle(event);
      }
    }
  }

  /** Adds held back while a pause lasts (see pause), in the order they came. */
  let held: (() => void)[] | undefined;
  let pauses = 0;

  /** What the pauses held back goes into the chains, in the order it came. */
  function release() {
    const waiting = held ?? [];
    held = undefined;
    pauses = 0;
    for (const add of waiting) add();
  }

  function addNow(key: string, read: () => Promise<InboundEvent | InboundEvent[] | undefined>, handle: (event: InboundEvent) => Promise<IngressResult>) {
    const previous = chains.get(key) ?? Promise.resolve();
    const next = previous.then(async () => {
      let events: InboundEvent | InboundEvent[] | undefined;
      try {
        events = await read();
      } catch (err) {
        options.log.warn({ err }, 'a Discord event could not be read; skipped');
        return;
      }
      for (const event of Array.isArray(events) ? events : events ? [events] : []) await store(event, handle);
    });
    chains.set(key, next);
    void next.finally(() => {
      if (chains.get(key) === next) chains.delete(key);
    });
  }

  return {
    /**
     * Reads the event (`read` may fetch what the gateway left out; several events are stored in their order) and
     * stores it after the channel's earlier ones.
     */
    add(key: string, read: () => Promise<InboundEvent | InboundEvent[] | undefined>, handle: (event: InboundEvent) => Promise<IngressResult>) {
      if (held) held.push(() => addNow(key, read, handle));
      else addNow(key, read, handle);
    },
    /**
     * Holds every add back until the returned function is called, when they go in the order they came. Meanwhile
     * `ahead` adds what must be stored before them (what was missed while disconnected, found once connected again).
     */
    pause(): { ahead: typeof addNow; resume: () => void } {
      held ??= [];
      pauses++;
      let resumed = false;
      return {
        ahead: addNow,
        resume() {
          if (resumed) return;
          resumed = true;
          if (pauses > 0) pauses--;
          if (pauses === 0) release();
        },
      };
    },
    /** Waits (up to `timeoutMs`) for the events being stored; what a pause holds back goes now (stopping). */
    async drain(timeoutMs: number) {
      release();
      await Promise.race([Promise.all(chains.values()), sleep(timeoutMs)]);
    },
  };
}
