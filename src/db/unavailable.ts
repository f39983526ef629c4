import { settledWithin, sleep, STALLED } from '#src/retry.ts';

/** postgres.js's own codes for a connection that is gone or could not be made. */
const DRIVER_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

/**
 * Whether an error (or what it wraps: drizzle's "Failed query" carries the driver's error as its cause) says the
 * database was away for a moment (restarting, shutting down, a dropped connection), not that the statement was wrong:
 * the work can be done again once it is back. SQLSTATE class 08 is a connection exception; 57P01-57P03 are an
 * administrator or crash shutdown and "cannot connect now".
 */
export function databaseUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, syscall } = e as { code?: unknown; syscall?: unknown };
    if (typeof code !== 'string') continue;
    if (DRIVER_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
    // A server reached through its Unix socket takes the socket's file away while it restarts.
    if (code === 'ENOENT' && syscall === 'connect') return true;
  }
  return false;
}

/**
 * Waits until the database answers again (a restart has ended), asking every few hundred milliseconds: true once it
 * does, false when `withinMs` has passed, `stop()` says to give up, or an error says something else is wrong. Each
 * try is bounded too: a server that does not answer at all would hold a connection attempt for its whole timeout.
 */
export async function waitForDatabase(sql: { (strings: TemplateStringsArray): PromiseLike<unknown> }, options: { withinMs: number; stop?: () => boolean }): Promise<boolean> {
  const until = Date.now() + options.withinMs;
  for (let pause = 100; ; pause = Math.min(pause * 2, 1000)) {
    if (options.stop?.()) return false;
    const left = until - Date.now();
    if (left <= 0) return false;
    try {
      if ((await settledWithin(Promise.resolve(sql`select 1`), Math.min(left, 5000))) !== STALLED) return true;
    } catch (err) {
      if (!databaseUnavailable(err)) return false;
    }
    await sleep(Math.min(pause, Math.max(0, until - Date.now())));
  }
}
