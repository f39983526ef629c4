import type { Logger } from 'pino';
import type { App } from '#src/app.ts';

export interface Shutdown {
  /** The app to stop on a signal; a signal that came while it was starting stops it now. Resolves once it stopped. */
  attach(app: App, before?: () => Promise<void>): Promise<void>;
}

/**
 * SIGINT and SIGTERM stop the app cleanly (turns released or finished, the embedded Postgres stopped). Installed
 * before the app starts, so Ctrl-C during start-up also stops what has started instead of killing the process with
 * its database running. A second signal exits at once.
 */
export function stopOnSignal(log: Logger, options: { exitCode?: boolean } = {}): Shutdown {
  let signalled: NodeJS.Signals | undefined;
  let onSignal: ((signal: NodeJS.Signals) => void) | undefined;
  let signals = 0;
  const handler = (signal: NodeJS.Signals) => {
    if (++signals > 1) process.exit(130);
    signalled = signal;
    onSignal?.(signal);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    attach(app, before) {
      return new Promise((resolve) => {
        let stopping = false;
        onSignal = (signal) => {
          if (stopping) return;
          stopping = true;
          log.info({ signal }, 'shutting down');
          const force = setTimeout(() => {
            log.error('shutdown took too long; exiting');
            process.exit(1);
          }, 15_000);
          force.unref();
          void (before ?? (async () => {}))()
            .catch((err: unknown) => log.warn({ err }, 'shutdown step failed'))
            .then(() => app.stop())
            .finally(() => {
              clearTimeout(force);
              process.off('SIGINT', handler);
              process.off('SIGTERM', handler);
              if (options.exitCode !== false) process.exitCode = 0;
              resolve();
            });
        };
        if (signalled) onSignal(signalled);
      });
    },
  };
}
