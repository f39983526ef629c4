// A platform unreachable at start-up: Parlor runs on, says so in the log and in /healthz, and keeps trying, waiting
// longer each time (2 s, 4 s, … up to a minute), until it connects, the connector stops, or it hears what no retry
// mends (a refused token).
import type { Logger } from 'pino';
import type { ConnectorStatus } from '#src/connector.ts';
import { sleep } from '#src/retry.ts';

const MAX_WAIT_MS = 60_000;

export async function keepConnecting(options: {
  /** The platform's name, for the log. */
  platform: string;
  /** Why the first attempt failed. */
  first: unknown;
  connect(): Promise<void>;
  signal: AbortSignal;
  describe(err: unknown): string;
  /**
   * A failure no retry mends (a refused token): what /healthz shows and what the log says, or undefined for one
   * worth trying again.
   */
  fatal(err: unknown): { detail: string; message: string } | undefined;
  setState(state: ConnectorStatus): void;
  log: Logger;
  /** Where it connects, for the log. */
  where: Record<string, unknown>;
}): Promise<void> {
  let err = options.first;
  for (let attempt = 1; !options.signal.aborted; attempt++) {
    const waitMs = Math.min(MAX_WAIT_MS, 2000 * 2 ** (attempt - 1));
    const detail = `${options.describe(err)}; trying again in ${Math.round(waitMs / 1000)} s`;
    options.setState({ state: 'down', detail });
    options.log.warn({ ...options.where, attempt }, `cannot reach ${options.platform} (${detail})`);
    await sleep(waitMs, options.signal);
    if (options.signal.aborted) return;
    try {
      await options.connect();
      options.log.info({ attempt }, `${options.platform} is reachable again`);
      return;
    } catch (next) {
      const fatal = options.fatal(next);
      if (fatal) {
        options.setState({ state: 'down', detail: fatal.detail });
        options.log.error(fatal.message);
        return;
      }
      err = next;
    }
  }
}
