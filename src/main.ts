// The `parlor` command line.
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CONNECTOR_IDS, CONNECTORS } from '#connectors/registry.ts';
import type { InitValues } from '#src/cli/init.ts';
import { initOptions, initOptionsHelp } from '#src/cli/init-connector.ts';
import { loadDotEnv, parseSettings, type Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { DatabaseUnavailableError, EmbeddedPostgresError } from '#src/db/embedded-postgres-error.ts';

interface Command {
  summary: string;
  /** The command's own help: its usage line and options. */
  help: string;
  options: NonNullable<ParseArgsConfig['options']>;
  /** The name its one positional argument gets among the values, when it takes one. */
  positional?: string;
  run(settings: Settings, values: Record<string, unknown>): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  init: {
    summary: 'create a persona (and a .env, if there is none) from a few questions or options',
    help: `Usage: parlor init [NAME] [options]

Writes a persona folder under PARLOR_PERSONAS_DIR (default ./personas): SOUL.md, a commented connectors.jsonc,
tools.jsonc and schedules.jsonc, and workspace/; and, when this folder has no .env, one with the model settings.
It never overwrites a persona or a .env. At a terminal it asks a few questions; with any option below, or with
its input piped, it asks nothing.
  NAME                    the persona's folder: lowercase letters, digits, - and _ (default: assistant, when there is no persona yet)
  --soul TEXT             who it is, in one line, e.g. "a terse Linux admin who helps me run my servers"
  --provider NAME         openai (any OpenAI-compatible endpoint; the default) or anthropic
  --base-url URL          the model endpoint, e.g. http://localhost:11434/v1 (Ollama)
  --model NAME            the model, e.g. llama3.1
  --api-key KEY           the endpoint's API key (Anthropic and OpenAI's own API need one)
${initOptionsHelp(CONNECTORS)}  --yes, -y               take the defaults without asking
`,
    options: {
      soul: { type: 'string' },
      provider: { type: 'string' },
      'base-url': { type: 'string' },
      model: { type: 'string' },
      'api-key': { type: 'string' },
      ...initOptions(CONNECTORS),
      yes: { type: 'boolean', short: 'y' },
    },
    positional: 'name',
    run: async (settings, values) => (await import('#src/cli/init.ts')).init(settings, values as InitValues),
  },
  start: {
    summary: 'run Parlor: connectors, HTTP server and turn workers',
    help: `Usage: parlor start [--role all|ingress|worker]

Runs Parlor until Ctrl-C: the platform connectors whose tokens are set, the HTTP server and the turn workers.
  --role all       everything (the default)
  --role ingress   the connectors and the HTTP server, no turns: --role worker processes on the same database run them
  --role worker    turn jobs only, no connectors and no HTTP server; add it beside another process on the same database
`,
    options: { role: { type: 'string', default: 'all' } },
    run: async (settings, values) => (await import('#src/cli/start.ts')).start(settings, values as { role: string }),
  },
  chat: {
    summary: 'talk to a persona in this terminal (pipe lines in to script it)',
    help: `Usage: parlor chat [--persona NAME]

Talks to a persona in this terminal: /new starts afresh, /stop interrupts, Ctrl-D quits. Piped input is one
message per line, each answered before the next is sent.
  --persona NAME  the persona to talk to (default: the one marked "default", then "assistant", then the first)
`,
    options: { persona: { type: 'string' } },
    run: async (settings, values) => (await import('#src/cli/chat.ts')).chat(settings, values as { persona?: string }),
  },
  conversations: {
    summary: 'list conversations: persona, connector, last activity, messages and turns',
    help: `Usage: parlor conversations [--persona NAME] [--limit N]

Lists conversations, most recently active first.
  --persona NAME  only this persona's
  --limit N       at most N (default 50)
`,
    options: { persona: { type: 'string' }, limit: { type: 'string' } },
    run: async (settings, values) => (await import('#src/cli/inspect.ts')).conversations(settings, values as { persona?: string; limit?: string }),
  },
  log: {
    summary: "show a conversation's transcript (tool calls folded)",
    help: `Usage: parlor log <conversation> [--limit N] [--full]

Shows a conversation's messages, oldest first: who wrote them, when, and the tool calls with their results folded to
a line each. The ids come from parlor conversations (e.g. assistant:terminal:assistant).
  --limit N  the last N messages (default 100)
  --full     tool calls and results in full
`,
    options: { limit: { type: 'string' }, full: { type: 'boolean' } },
    positional: 'conversation',
    run: async (settings, values) => (await import('#src/cli/inspect.ts')).log(settings, values as { conversation?: string; limit?: string; full?: boolean }),
  },
  migrate: {
    summary: 'apply database migrations and exit',
    help: `Usage: parlor migrate

Applies pending database migrations to DATABASE_URL (or the embedded Postgres) and exits. start and chat migrate on
boot too.
`,
    options: {},
    run: async (settings) => {
      const [{ runMigrate }, { createLogger }] = await Promise.all([import('#src/cli/migrate.ts'), import('#src/log.ts')]);
      return runMigrate(settings, createLogger({ level: settings.logLevel, stream: 'stderr', file: settings.logFile }));
    },
  },
  doctor: {
    summary: 'check configuration, database, model endpoint and connector tokens',
    help: `Usage: parlor doctor [--persona NAME]

Checks each part a running Parlor needs (personas, database, model endpoint, connector tokens, the shell sandbox,
approvals) and says how to fix what is wrong. Exits 1 if a check fails.

  --persona NAME   also list the tools NAME's turns see, for each kind of turn (user, cron, heartbeat, subagent)
`,
    options: { persona: { type: 'string' } },
    run: async (settings, values) => {
      const [
        { runDoctor },
        { createBuiltinTools },
        { createCustomToolCommands },
        { ProcessRegistry },
        { searchProviderFromSettings },
        { MemoryRegistry },
        { ToolCatalog },
        { createCustomToolProvider },
        { createMcpToolProvider },
        { default: pino },
        { default: path },
      ] = await Promise.all([
        import('#src/doctor.ts'),
        import('#tools/index.ts'),
        import('#tools/shell-exec.ts'),
        import('#src/tools/processes.ts'),
        import('#src/tools/web/search.ts'),
        import('#src/memory/store.ts'),
        import('#src/tools/catalog.ts'),
        import('#src/tools/custom/provider.ts'),
        import('#src/mcp/index.ts'),
        import('pino'),
        import('node:path'),
      ]);
      // The whole tool set, so that doctor checks every name a persona's tools.jsonc may use.
      const tools = createBuiltinTools({
        timezone: settings.timezone,
        processes: new ProcessRegistry(pino({ level: 'silent' })),
        webSearch: searchProviderFromSettings(settings),
        memory: new MemoryRegistry(),
      });
      const customTools = createCustomToolProvider({
        sharedDir: settings.toolsDir,
        reservedNames: tools.map((t) => t.name),
        commands: createCustomToolCommands(),
        log: pino({ level: 'silent' }),
      });
      const mcp = createMcpToolProvider({ globalFile: path.join(settings.home, 'mcp.jsonc'), env: process.env, log: pino({ level: 'silent' }) });
      const catalog = new ToolCatalog(tools, [customTools, mcp]);
      try {
        return await runDoctor(settings, process.stdout, {
          tools,
          connectors: CONNECTORS,
          connectorIds: CONNECTOR_IDS,
          catalog,
          customTools,
          mcp,
          ...(typeof values.persona === 'string' ? { persona: values.persona } : {}),
        });
      } finally {
        await catalog.close();
      }
    },
  },
};

const USAGE = `Usage: parlor <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(15)}${c.summary}`)
  .join('\n')}

parlor <command> --help shows a command's options; parlor --version prints the version.
`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** A mistake on the command line: one line, the command's help pointed at, exit 2. */
class UsageError extends Error {}

function parse(name: string, command: Command, args: string[]): Record<string, unknown> {
  try {
    const { values, positionals } = parseArgs({ args, options: command.options, strict: true, allowPositionals: Boolean(command.positional) });
    if (positionals.length > 1) throw Object.assign(new Error(`Unexpected argument '${positionals[1]}'`), { code: 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' });
    return command.positional && positionals[0] !== undefined ? { ...values, [command.positional]: positionals[0] } : values;
  } catch (err) {
    const code = (err as { code?: string }).code;
    const message = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '').replace(/\.$/, '');
    if (code?.startsWith('ERR_PARSE_ARGS')) throw new UsageError(`parlor ${name}: ${message}; see parlor ${name} --help`);
    throw err;
  }
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(`parlor ${version()}\n`);
    return 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(`parlor: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.help);
    return 0;
  }
  const values = parse(name, command, rest);
  loadDotEnv();
  return command.run(parseSettings(process.env, process.cwd(), CONNECTORS), values);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Lingering handles (sockets, timers) must not keep a finished command alive.
    setTimeout(() => process.exit(code), 500).unref();
  },
  (err: unknown) => {
    if (err instanceof UsageError || err instanceof ConfigError || err instanceof DatabaseUnavailableError || err instanceof EmbeddedPostgresError) {
      process.stderr.write(`${err instanceof UsageError ? '' : 'parlor: '}${err.message}\n`);
      process.exit(err instanceof UsageError || err instanceof ConfigError ? 2 : 1);
    }
    process.stderr.write(`parlor: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
