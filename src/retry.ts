import pRetry, { AbortError } from 'p-retry';

/** What an error may say about retrying it: 429/5xx/network errors are retryable, and may ask for a delay. */
export interface RetryHints {
  retryable?: boolean;
  retryAfterMs?: number;
}

export interface RetryOptions {
  /** Give up once this much time has passed since the first attempt (a wait that would pass it is not started). */
  deadlineMs: number;
  /** At most this many retries; by default only the deadline limits them. */
  retries?: number;
  minDelayMs?: number;
  maxDelayMs?: number;
  signal?: AbortSignal;
  /** Called before each wait with the delay actually waited. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
}

/**
 * The one place that decides retries: an error retries when it says it is retryable, after the delay it asks
 * for (`retry_after`) or an exponential backoff with jitter (capped at `maxDelayMs`), until the deadline.
 * Everything else is rethrown at once. p-retry runs the attempts; the waits are ours, so the delay logged is the
 * delay waited.
 */
export async function withRetries<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const started = Date.now();
  const minDelay = options.minDelayMs ?? 500;
  const maxDelay = options.maxDelayMs ?? 8_000;
  return pRetry(
    async (attempt) => {
      try {
        return await fn(attempt);
      } catch (err) {
        const hints = (err ?? {}) as RetryHints;
        if (!hints.retryable || options.signal?.aborted) throw new AbortError(err as Error);
        const backoff = Math.min(maxDelay, minDelay * 2 ** (attempt - 1)) * (1 + Math.random() * 0.25);
        const wait = Math.round(hints.retryAfterMs ?? backoff);
        if (Date.now() - started + wait > options.deadlineMs) throw new AbortError(err as Error);
        options.onRetry?.(err, attempt, wait);
        await sleep(wait, options.signal);
        if (options.signal?.aborted) throw new AbortError(err as Error);
        throw err;
      }
    },
    // No delay of p-retry's own: the wait above is the whole of it.
    { retries: options.retries ?? Number.POSITIVE_INFINITY, minTimeout: 0, maxTimeout: 0, factor: 1, randomize: false },
  );
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}

export const STALLED = Symbol('stalled');

/** The attempt's outcome, or STALLED if it has not settled within `ms` (it is left running; a later failure is ignored). */
export async function settledWithin<T>(attempt: Promise<T>, ms: number): Promise<T | typeof STALLED> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<typeof STALLED>((resolve) => (timer = setTimeout(() => resolve(STALLED), ms)));
  try {
    const outcome = await Promise.race([attempt, stalled]);
    if (outcome === STALLED) attempt.catch(() => {});
    return outcome;
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves when `promise` settles, `ms` pass or `signal` aborts, whichever is first. */
export function settleWithin(promise: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    promise.then(done, done);
  });
}
