// `parlor start`: connectors, the HTTP server and turn workers; with `--role ingress` the connectors and the HTTP
// server alone, with `--role worker` turn jobs alone (processes of both roles share one database).
import { createPlatformConnectors, startApp } from '#src/app.ts';
import type { Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { createLogger } from '#src/log.ts';
import { stopOnSignal } from './signals.ts';

export async function start(settings: Settings, values: { role: string }): Promise<number> {
  if (!['all', 'ingress', 'worker'].includes(values.role)) throw new ConfigError(`--role ${values.role} is not one of all, ingress, worker`);
  const log = createLogger({ level: settings.logLevel, file: settings.logFile });
  const shutdown = stopOnSignal(log);
  const role = values.role;
  // Connectors receive where this process serves the platforms; a `--role worker` only runs turns, and a
  // `--role ingress` runs none.
  const serves = role !== 'worker';
  const app = await startApp({
    settings,
    log,
    worker: role !== 'ingress',
    http: serves,
    connectors: serves ? () => createPlatformConnectors(settings, log) : undefined,
  });
  log.info({ personas: app.personas.map((p) => p.name), role }, 'Parlor is running; Ctrl-C stops it');
  await shutdown.attach(app);
  return 0;
}
