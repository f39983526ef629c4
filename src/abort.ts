/** A signal for one request: it aborts after `ms`, or when `signal` does. `clear()` stops the timer once done. */
export interface Deadline {
  signal: AbortSignal;
  clear(): void;
}

/**
 * `AbortSignal.any([signal, AbortSignal.timeout(ms)])`, without its flaw on Node 20: there the timeout signal
 * is held only weakly, by its timer and by `any`, so a garbage collection before it fires loses it, and the
 * request it guards never times out. Here the timer holds its controller.
 */
export function deadline(ms: number, signal?: AbortSignal): Deadline {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
  timer.unref();
  return {
    signal: signal ? AbortSignal.any([signal, controller.signal]) : controller.signal,
    clear: () => clearTimeout(timer),
  };
}

/** Runs `fn` with a deadline's signal, and clears the deadline once it settles. */
export async function withDeadline<T>(ms: number, signal: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const limit = deadline(ms, signal);
  try {
    return await fn(limit.signal);
  } finally {
    limit.clear();
  }
}
