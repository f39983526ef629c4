// The `parlor` command line.
import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { createTerminalConnector } from '#connectors/terminal.ts';
import { createBuiltinTools } from '#tools/index.ts';
import { createPlatformConnectors, startApp, type App } from './app.ts';
import { loadDotEnv, parseSettings, type Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { DatabaseUnavailableError } from '#src/db/client.ts';
import { EmbeddedPostgresError } from '#src/db/embedded-postgres.ts';
import { createLogger } from '#src/log.ts';
import { runDoctor } from '#src/doctor.ts';
import { runMigrate } from '#src/migrate-command.ts';

const USAGE = `Usage: parlor <command> [options]

Commands:
  start [--role all|worker]   run Parlor: connectors, HTTP server and turn workers (worker: turn jobs only)
  chat [--persona NAME]       talk to a persona in this terminal (pipe lines in to script it)
  migrate                     apply database migrations and exit
  doctor                      check configuration, database, model endpoint and connector tokens
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  loadDotEnv();
  const settings = parseSettings(process.env);
  switch (command) {
    case 'start':
      return start(settings, rest);
    case 'chat':
      return chat(settings, rest);
    case 'migrate':
      return runMigrate(settings, createLogger({ level: settings.logLevel, stream: 'stderr' }));
    case 'doctor':
      return runDoctor(settings, process.stdout, { tools: createBuiltinTools({ timezone: settings.timezone }) });
    default:
      process.stderr.write(`parlor: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

async function start(settings: Settings, args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { role: { type: 'string', default: 'all' } } });
  if (values.role !== 'all' && values.role !== 'worker') throw new ConfigError(`--role ${values.role} is not one of all, worker`);
  const log = createLogger({ level: settings.logLevel });
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
  for (const id of Object.keys(settings.connectors)) {
    if (role === 'all' && !app.connectors.has(id)) log.warn({ connector: id }, `${id} is configured but this version of Parlor has no ${id} connector yet`);
  }
  await untilSignal(app, log);
  return 0;
}

async function chat(settings: Settings, args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { persona: { type: 'string' } } });
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

function untilSignal(app: App, log: Logger, exitAfter = true): Promise<void> {
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Lingering handles (sockets, timers) must not keep a finished command alive.
    setTimeout(() => process.exit(code), 500).unref();
  },
  (err: unknown) => {
    if (err instanceof ConfigError || err instanceof DatabaseUnavailableError || err instanceof EmbeddedPostgresError) {
      process.stderr.write(`parlor: ${err.message}\n`);
      process.exit(err instanceof ConfigError ? 2 : 1);
    }
    process.stderr.write(`parlor: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
