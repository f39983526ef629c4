import pRetry, { AbortError } from 'p-retry';

/** What an error may say about retrying it: 429/5xx/network errors are retryable, and may ask for a delay. */
export interface RetryHints {
  retryable?: boolean;
  retryAfterMs?: number;
}

export interface RetryOptions {
  /** Give up once this much time has passed since the first attempt. */
  deadlineMs: number;
  retries?: number;
  minDelayMs?: number;
  maxDelayMs?: number;
  signal?: AbortSignal;
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
}

/**
 * The one place that decides retries: an error retries when it says it is retryable, after the delay it asks
 * for (`retry_after`) or an exponential backoff, until the deadline. Everything else is rethrown at once.
 */
export async function withRetries<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const started = Date.now();
  const minDelay = options.minDelayMs ?? 500;
  // p-retry rethrows an AbortError's original error, so callers see what the call threw.
  return pRetry(
    async (attempt) => {
      try {
        return await fn(attempt);
      } catch (err) {
        const hints = (err ?? {}) as RetryHints;
        if (!hints.retryable || options.signal?.aborted) throw new AbortError(err as Error);
        const wait = hints.retryAfterMs ?? 0;
        if (Date.now() - started + Math.max(wait, minDelay) > options.deadlineMs) throw new AbortError(err as Error);
        // p-retry adds its own backoff; a server-given delay comes first.
        if (wait > 0) {
          options.onRetry?.(err, attempt, wait);
          await sleep(wait, options.signal);
        } else {
          options.onRetry?.(err, attempt, minDelay * 2 ** (attempt - 1));
        }
        throw err;
      }
    },
    {
      retries: options.retries ?? 6,
      minTimeout: minDelay,
      maxTimeout: options.maxDelayMs ?? 8_000,
      factor: 2,
      randomize: true,
      maxRetryTime: options.deadlineMs,
      signal: options.signal,
    },
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
