/**
 * Polls `check` until it returns something truthy, and returns that; fails at the deadline naming `what`. The second
 * argument is what is awaited (for the message) or, as a number, the timeout.
 */
export async function until<T>(check: () => T | Promise<T>, what?: number | string | (() => string), timeoutMs = 10_000): Promise<NonNullable<T>> {
  const limit = typeof what === 'number' ? what : timeoutMs;
  const deadline = Date.now() + limit;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) {
      const label = typeof what === 'function' ? what() : typeof what === 'string' ? what : 'the condition';
      throw new Error(`timed out after ${limit} ms waiting for ${label}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
