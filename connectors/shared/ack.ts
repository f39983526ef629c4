// Acknowledging a platform that wants an answer within seconds (Discord interactions, Slack events: 3 s), however
// long the core takes to store the event.
import type { Logger } from 'pino';
import type { IngressResult } from '#src/connector.ts';
import { settledWithin, sleep, STALLED } from '#src/retry.ts';

/** Answer this much before the platform's deadline: the acknowledgement itself takes a round trip. */
const MARGIN_MS = 500;

/**
 * An attempt to store an event that has not settled in this long (a statement left hanging by a connection that
 * died as Postgres restarted) is made again beside it: the event's dedupe keeps it stored once. Waited for, the
 * event would be stored only when the hanging statement ended, and lost if the process died first.
 */
export const ATTEMPT_STALL_MS = 5_000;


export type Acknowledgement =
  /** Stored in time: the core's answer (a click's notice, say) goes with the acknowledgement. */
  | { kind: 'stored'; result: IngressResult }
  /**
   * Not stored by the deadline: acknowledge now, without the core's answer. The event is still being stored, and
   * stored it will be: a platform that has its acknowledgement never delivers it again, so failures are retried
   * here. `result` settles with the core's answer (undefined if it never could be stored), for a follow-up.
   */
  | { kind: 'late'; result: Promise<IngressResult | undefined> };

interface AckOptions {
  log: Logger;
  /**
   * Keeps the event on disk (the core's EventKeeper) before a late acknowledgement, and returns what drops it once
   * stored: a process killed before it stores the event then stores it at its next start. When keeping fails, the
   * event is not acknowledged (its error is thrown) and the platform sends it again.
   */
  keep?: () => Promise<() => Promise<void>>;
  retryForMs?: number;
  firstRetryMs?: number;
  stallMs?: number;
}

/**
 * Hands an event to the core (`handle`: the ingress, which resolves once the event is durably stored) and says how
 * to acknowledge it by `deadlineMs`. A failure before the deadline is the platform's to redeliver (`handle`'s error
 * is thrown: leave the event unacknowledged, or answer with an error status); after it, this function's to retry.
 */
export async function acknowledgeBy(deadlineMs: number, handle: () => Promise<IngressResult>, options: AckOptions): Promise<Acknowledgement> {
  const startedAt = Date.now();
  const first = handle();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), Math.max(0, deadlineMs - MARGIN_MS))));
  try {
    const outcome = await Promise.race([first, late]);
    if (outcome !== 'late') return { kind: 'stored', result: outcome };
  } finally {
    clearTimeout(timer);
  }
  let release: (() => Promise<void>) | undefined;
  if (options.keep) {
    try {
      release = await options.keep();
    } catch (err) {
      first.catch(() => undefined); // Stored or not, the platform's redelivery settles it (deduplicated).
      options.log.error({ err }, 'an event not stored by the deadline could not be kept on disk either; it is left unacknowledged');
      throw err;
    }
  }
  const result = keepTrying(first, startedAt, handle, options).then(async (stored) => {
    if (stored !== undefined) await release?.();
    return stored;
  });
  return { kind: 'late', result };
}

async function keepTrying(first: Promise<IngressResult>, firstStartedAt: number, handle: () => Promise<IngressResult>, options: AckOptions): Promise<IngressResult | undefined> {
  const giveUpAt = Date.now() + (options.retryForMs ?? 10 * 60_000);
  let delay = options.firstRetryMs ?? 1000;
  const stallMs = options.stallMs ?? ATTEMPT_STALL_MS;
  let attempt: Promise<IngressResult> = first;
  // Counted from each attempt's start: the first has used part of its time before the deadline, and the sooner
  // an event the platform no longer holds is stored, the less a kill of this process can lose.
  let startedAt = firstStartedAt;
  for (;;) {
    try {
      const outcome = await settledWithin(attempt, Math.max(0, startedAt + stallMs - Date.now()));
      if (outcome !== STALLED) return outcome;
      if (Date.now() > giveUpAt) throw new Error('storing it never finished');
      options.log.warn({ afterMs: stallMs }, 'storing an acknowledged event has not finished; trying again beside it');
      startedAt = Date.now();
      attempt = handle();
    } catch (err) {
      if (Date.now() + delay > giveUpAt) {
        const fate = options.keep ? 'it stays on disk for the next start' : 'it is lost';
        options.log.error({ err }, `an event acknowledged at the platform deadline could not be stored; ${fate}`);
        return undefined;
      }
      options.log.warn({ err, retryInMs: delay }, 'an event acknowledged at the platform deadline could not be stored yet; retrying');
      await sleep(delay);
      delay = Math.min(delay * 2, 30_000);
      startedAt = Date.now();
      attempt = handle();
    }
  }
}
