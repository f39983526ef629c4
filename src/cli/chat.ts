// `parlor chat`: the local owner talking to one persona in this terminal.
import { createTerminalConnector } from '#connectors/terminal.ts';
import { startApp, type App } from '#src/app.ts';
import type { Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { createLogger } from '#src/log.ts';
import { untilSignal } from './signals.ts';

export async function chat(settings: Settings, values: { persona?: string }): Promise<number> {
  const interactive = Boolean(process.stdin.isTTY && process.stdout.isTTY);
  // stdout carries the conversation; logs go to stderr, quiet unless asked for.
  const log = createLogger({ level: process.env.LOG_LEVEL ? settings.logLevel : 'warn', stream: 'stderr' });
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  // The terminal may read a line before startApp has returned.
  let ready!: (app: App) => void;
  const appReady = new Promise<App>((resolve) => (ready = resolve));
  const app = await startApp({
    settings,
    log,
    worker: true,
    http: false,
    connectors: ({ personas }) => {
      const persona = values.persona ?? (personas.find((p) => p.isDefault) ?? personas.find((p) => p.name === 'assistant') ?? personas[0]).name;
      if (!personas.some((p) => p.name === persona)) {
        throw new ConfigError(`no persona named "${persona}" in ${settings.personasDir} (have: ${personas.map((p) => p.name).join(', ')})`);
      }
      if (interactive) process.stdout.write(`Talking to ${persona}. /new starts afresh, /stop interrupts, Ctrl-D quits.\n`);
      return [
        createTerminalConnector({
          persona,
          input: process.stdin,
          output: process.stdout,
          interactive,
          waitForIdle: (id) => appReady.then((a) => a.waitForIdle(id, undefined, { orQuestion: true })),
          onDone: () => done(),
        }),
      ];
    },
  });
  ready(app);
  await Promise.race([finished, untilSignal(app, log, false)]);
  await app.stop();
  return 0;
}
