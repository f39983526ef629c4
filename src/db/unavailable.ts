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
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (DRIVER_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
  }
  return false;
}
