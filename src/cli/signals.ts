import type { Logger } from 'pino';
import type { App } from '#src/app.ts';

/** Resolves once a SIGINT or SIGTERM has stopped the app; a second signal exits at once. */
export function untilSignal(app: App, log: Logger, exitAfter = true): Promise<void> {
  return new Promise((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      if (++signals > 1) process.exit(130);
      log.info({ signal }, 'shutting down');
      const force = setTimeout(() => {
        log.error('shutdown took too long; exiting');
        process.exit(1);
      }, 15_000);
      force.unref();
      void app.stop().finally(() => {
        clearTimeout(force);
        resolve();
        if (exitAfter) process.exitCode = 0;
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
