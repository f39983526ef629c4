import { GrammyError, type Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import type { ConnectorStatus } from '#src/connector.ts';
import { settledWithin, sleep, STALLED } from '#src/retry.ts';
import { ATTEMPT_STALL_MS } from '../shared/ack.ts';

export interface PollingOptions {
  api: Api;
  /** Aborting it ends the loop. */
  signal: AbortSignal;
  /** Long-poll wait per getUpdates call. */
  timeoutSeconds: number;
  allowedUpdates: readonly Exclude<keyof Update, 'update_id'>[];
  log: Logger;
  /** Hands one update to the core; resolving acknowledges it, throwing leaves it to be delivered again. */
  handle(update: Update): Promise<void>;
  /** Pause after a failed update before it is asked for again. */
  retryDelayMs?: number;
  /** How long storing an update may take before it is fetched and stored again beside it (ATTEMPT_STALL_MS). */
  stallMs?: number;
  /** Pause after an empty answer that came back at once (a test emulator), so it is not hammered. */
  idleDelayMs?: number;
  /** Told whether Telegram answers (for /healthz). */
  onState?(state: ConnectorStatus): void;
}

/** How long the loop waits after failed getUpdates calls in a row, at most. */
const MAX_FAILURE_DELAY_MS = 60_000;

/**
 * Long polling: each update is acknowledged (the next offset moves past it) only once the core has taken it, so
 * a crash re-delivers it and the core's dedupe drops the copy. Clicks run beside the loop, never behind a slow
 * message. Resolves when the signal is aborted and the clicks in hand are done.
 */
export async function pollUpdates(options: PollingOptions): Promise<void> {
  const { api, signal, log } = options;
  const clicks = new Set<Promise<void>>();
  let offset = 0;
  let failures = 0;
  while (!signal.aborted) {
    const asked = Date.now();
    let updates: Update[];
    try {
      updates = await api.getUpdates({ offset, timeout: options.timeoutSeconds, allowed_updates: [...options.allowedUpdates] }, signal as never);
    } catch (err) {
      if (signal.aborted) break;
      failures++;
      if (err instanceof GrammyError && err.error_code === 409) {
        const detail = 'another process is receiving updates for this bot token (409 Conflict): stop it, or remove its webhook; retrying in 30 s';
        options.onState?.({ state: 'down', detail });
        log.error(detail);
        await sleep(30_000, signal);
      } else {
        // Every failed try is logged with its cause and when the next one is; the wait grows while it keeps failing.
        const waitMs = Math.min(MAX_FAILURE_DELAY_MS, 2000 * 2 ** Math.min(failures - 1, 10));
        const detail = `getUpdates failed (${err instanceof Error ? err.message : String(err)}); retrying in ${Math.round(waitMs / 1000)} s`;
        options.onState?.({ state: 'down', detail });
        log.warn({ attempt: failures }, detail);
        await sleep(waitMs, signal);
      }
      continue;
    }
    if (failures > 0) {
      log.info({ after: failures }, 'Telegram answers again');
      failures = 0;
    }
    options.onState?.({ state: 'up' });
    for (const update of updates) {
      if (update.callback_query) {
        // A click is answered at once, never behind a slow message in the same batch.
        const click: Promise<void> = options
          .handle(update)
          .catch((err: unknown) => log.warn({ err, update: update.update_id }, 'click could not be handled'))
          .finally(() => clicks.delete(click));
        clicks.add(click);
        offset = update.update_id + 1;
        continue;
      }
      try {
        // One that never finishes (a statement a dying connection left hanging) is fetched and stored again beside
        // it, rather than holding up every update after it.
        if ((await settledWithin(options.handle(update), options.stallMs ?? ATTEMPT_STALL_MS)) === STALLED) throw new Error('storing it has not finished');
      } catch (err) {
        // Not acknowledged: Telegram delivers it again on the next call (the core sets it aside after a few tries).
        log.error({ err, update: update.update_id }, 'update could not be stored; it will be delivered again');
        await sleep(options.retryDelayMs ?? 1000, signal);
        break;
      }
      offset = update.update_id + 1;
    }
    if (updates.length === 0 && Date.now() - asked < 1000) await sleep(options.idleDelayMs ?? 200, signal);
  }
  await Promise.allSettled(clicks);
}
