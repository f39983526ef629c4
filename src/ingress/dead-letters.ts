import type { Logger } from 'pino';
import type { InboundEvent, IngressResult } from '#src/connector.ts';
import { describeError, type Queryable } from '#src/db/client.ts';
import { recordInboundFailure } from '#src/db/inbound-failures.ts';
import { databaseUnavailable } from '#src/db/unavailable.ts';

/** Failed attempts to store one event before it is set aside, so one bad event cannot hold up every chat. */
export const DEAD_LETTER_AFTER = 3;

/**
 * The database or its connection is down or busy: every event would fail alike, and none of them is to blame.
 * SQLSTATE classes 08 (connection), 40 (serialization, deadlock), 53 (resources), 57 (shutdown, cancel), 58 (system).
 */
export function isTransientStoreError(err: unknown): boolean {
  if (databaseUnavailable(err)) return true;
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, name } = e as { code?: unknown; name?: unknown };
    if (name === 'DatabaseUnavailableError') return true;
    if (typeof code !== 'string') continue;
    if (/^(08|40|53|57|58)[0-9A-Z]{3}$/.test(code) || code === '55P03') return true;
    if (/^(CONNECTION_|CONNECT_TIMEOUT|ECONN|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN)/.test(code)) return true;
  }
  return false;
}

/** The error under the wrappers (drizzle's "Failed query: …" carries the database's own error as its cause). */
function rootCause(err: unknown): unknown {
  let e = err;
  for (let depth = 0; depth < 8 && e && typeof e === 'object' && (e as { cause?: unknown }).cause; depth++) e = (e as { cause: unknown }).cause;
  return e;
}

/**
 * What happens when the ingress could not store an event. Each failure is counted (outside the failed
 * transaction); the error is rethrown so the connector leaves the event unacknowledged and the platform delivers
 * it again. The failure that reaches DEAD_LETTER_AFTER dead-letters it instead: it is logged, kept as escaped JSON,
 * and reported as handled so the platform moves on. A failure of the database itself counts against no event.
 */
export function createDeadLetters(deps: { db: Queryable; log: Logger; deadLetterAfter?: number }) {
  const deadLetterAfter = deps.deadLetterAfter ?? DEAD_LETTER_AFTER;

  /** `event` as it was stored (sanitized); `raw` as it arrived. */
  return async function onStoreFailure(event: InboundEvent, err: unknown, raw: InboundEvent = event): Promise<IngressResult> {
    if (isTransientStoreError(err)) throw err;
    const log = deps.log.child({ connector: event.connector, event: event.externalId });
    let counted: { attempts: number; deadLettered: boolean };
    try {
      counted = await recordInboundFailure(deps.db, {
        connector: event.connector,
        externalId: event.externalId,
        error: describeError(rootCause(err)).slice(0, 2000),
        // JSON escapes NUL and lone surrogates, so the event survives as it arrived.
        raw: JSON.stringify(raw),
        deadLetterAfter,
      });
    } catch (recordErr) {
      log.warn({ err: recordErr }, 'the failure to store an event could not be counted');
      throw err;
    }
    if (!counted.deadLettered) {
      log.warn({ err: rootCause(err), attempts: counted.attempts }, `event could not be stored (attempt ${counted.attempts} of ${deadLetterAfter})`);
      throw err;
    }
    log.error(
      { err: rootCause(err), attempts: counted.attempts },
      `event ${event.connector}:${event.externalId} could not be stored after ${counted.attempts} attempts; dead-lettered in inbound_failures and acknowledged`,
    );
    return { status: 'ignored' };
  };
}
