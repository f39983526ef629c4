// `parlor start`: connectors, the HTTP server and turn workers; or, with `--role worker`, turn jobs only.
import { createPlatformConnectors, startApp } from '#src/app.ts';
import type { Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { createLogger } from '#src/log.ts';
import { stopOnSignal } from './signals.ts';

export async function start(settings: Settings, values: { role: string }): Promise<number> {
  if (values.role !== 'all' && values.role !== 'worker') throw new ConfigError(`--role ${values.role} is not one of all, worker`);
  const log = createLogger({ level: settings.logLevel, file: settings.logFile });
  const shutdown = stopOnSignal(log);
  const role = values.role;
  // Connectors receive where this process serves the platforms; a `--role worker` only runs turns.
  const app = await startApp({
    settings,
    log,
    worker: true,
    http: role === 'all',
    connectors: role === 'all' ? () => createPlatformConnectors(settings, log) : undefined,
  });
  log.info({ personas: app.personas.map((p) => p.name), role }, 'Parlor is running; Ctrl-C stops it');
  await shutdown.attach(app);
  return 0;
}
