// `parlor chat`: the local owner talking to one persona in this terminal.
import { createTerminalConnector, type TerminalConnector } from '#connectors/terminal/index.ts';
import { startApp, type App } from '#src/app.ts';
import type { Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { createLogger } from '#src/log.ts';

/** How soon a second Ctrl-C must follow the first to quit (the first stops the running turn). */
const DOUBLE_PRESS_MS = 3000;

export async function chat(settings: Settings, values: { persona?: string }): Promise<number> {
  const interactive = Boolean(process.stdin.isTTY && process.stdout.isTTY);
  // stdout carries the conversation; logs go to stderr, quiet unless asked for.
  const log = createLogger({ level: process.env.LOG_LEVEL ? settings.logLevel : 'warn', stream: 'stderr', file: settings.logFile });
  let quit!: (reason: string) => void;
  const quitting = new Promise<string>((resolve) => (quit = resolve));
  let inputEnded!: () => void;
  const ended = new Promise<void>((resolve) => (inputEnded = resolve));

  // Signals are handled from the start, so a Ctrl-C while Parlor starts still stops it cleanly.
  let lastInterrupt = 0;
  let terminal: TerminalConnector | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    const now = Date.now();
    if (signal === 'SIGINT' && interactive && terminal && now - lastInterrupt > DOUBLE_PRESS_MS) {
      // Once: stop what the persona is doing, like /stop. Twice: quit.
      lastInterrupt = now;
      process.stdout.write('\n(Ctrl-C again quits)\n');
      void terminal.interrupt().catch((err: unknown) => log.warn({ err }, 'could not stop the turn'));
      return;
    }
    quit('the terminal session ended');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

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
      if (interactive) process.stdout.write(`Talking to ${persona}. /new starts afresh, /stop or Ctrl-C interrupts, Ctrl-D quits.\n`);
      terminal = createTerminalConnector({
        persona,
        input: process.stdin,
        output: process.stdout,
        interactive,
        waitForIdle: (id) => appReady.then((a) => a.waitForIdle(id, undefined, { orQuestion: true })),
        onDone: () => inputEnded(),
      });
      return [terminal];
    },
  });
  ready(app);

  const why = await Promise.race([
    quitting,
    ended.then(async () => {
      // Input is over while a question waits (a script ran out of lines): nobody can answer it now, so it is closed,
      // a waiting tool is told so, and the turn finishes its answer before the terminal goes.
      const id = terminal?.conversationId();
      if (id && (await app.questions.expireOpen(id, 'the input ended before anyone answered'))) {
        await Promise.race([app.waitForIdle(id, 120_000), quitting]).catch(() => {});
      }
      return 'the input ended';
    }),
  ]);
  // Whatever is still running or waiting ends here: nothing answers into a later session unasked.
  const id = terminal?.conversationId();
  if (id) {
    await app.stopConversation(id, why).catch((err: unknown) => log.warn({ err }, 'could not stop the conversation'));
    // What was answered or closed just now is shown in this session, not the next one.
    await app.questions.closeResolved(id).catch((err: unknown) => log.warn({ err }, 'could not show how its questions ended'));
  }
  const force = setTimeout(() => process.exit(1), 15_000);
  force.unref();
  await app.stop();
  clearTimeout(force);
  // The handlers stay: a Ctrl-C pressed again while the process exits is one more "quit", not a kill.
  return 0;
}
