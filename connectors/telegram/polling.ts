import { GrammyError, type Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import { sleep } from '#src/retry.ts';

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
  /** Pause after an empty answer that came back at once (a test emulator), so it is not hammered. */
  idleDelayMs?: number;
}

/**
 * Long polling: each update is acknowledged (the next offset moves past it) only once the core has taken it, so
 * a crash re-delivers it and the core's dedupe drops the copy. Clicks run beside the loop, never behind a slow
 * message. Resolves when the signal is aborted and the clicks in hand are done.
 */
export async function pollUpdates(options: PollingOptions): Promise<void> {
  const { api, signal, log } = options;
  const clicks = new Set<Promise<void>>();
  let offset = 0;
  while (!signal.aborted) {
    const asked = Date.now();
    let updates: Update[];
    try {
      updates = await api.getUpdates({ offset, timeout: options.timeoutSeconds, allowed_updates: [...options.allowedUpdates] }, signal as never);
    } catch (err) {
      if (signal.aborted) break;
      if (err instanceof GrammyError && err.error_code === 409) {
        log.error('another process is receiving updates for this bot token (409 Conflict): stop it, or remove its webhook; retrying in 30 s');
        await sleep(30_000, signal);
      } else {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'getUpdates failed; retrying');
        await sleep(2000, signal);
      }
      continue;
    }
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
        await options.handle(update);
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
