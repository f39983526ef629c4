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
