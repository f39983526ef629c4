// The world a fault run happens in: a Postgres cluster of its own (so it can be restarted), the fake model, the fake
// Telegram, Discord and Slack servers, a persona on all three, and real `parlor start` processes kept running by a
// supervisor that can kill them with SIGKILL and restart them, as systemd would, or stop them (SIGSTOP) for longer
// than PARLOR_HUNG_AFTER_SECONDS and let them run again.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { urlOfDatabase } from '../support/database-url.ts';
import { connectDatabase, migrateDatabase } from '../../src/db/client.ts';
import { startFakeDiscord, type FakeDiscord } from '../support/fake-discord.ts';
import { startFakeLlm, type FakeHandler, type FakeLlm } from '../support/fake-llm.ts';
import { startFakeSlack, type FakeSlack } from '../support/fake-slack.ts';
import { startFakeTelegram, type BotApiReply, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { SLACK_CHANNEL, TELEGRAM_GROUP } from './platforms.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');

export const PERSONA = 'faulty';
/** How long a process may go without its heartbeat before the others fence it, in every fault run. */
export const HUNG_AFTER_SECONDS = 5;
export const TELEGRAM_TOKEN = '424242:FAULTS-token';

export interface WorldOptions {
  telegramUsers: number[];
  discordUsers: string[];
  slackUsers: string[];
  /** Worker processes beside the one that runs the connectors. */
  workers: number;
  /** Seconds an approval waits for a click before it expires. */
  approvalTimeoutSeconds: number;
  /** Asked before each Bot API call (see FakeTelegramOptions.chaos). */
  telegramChaos?: (method: string, body: Record<string, any>) => BotApiReply | 'drop' | undefined;
}

export interface ParlorProcess {
  name: string;
  role: 'all' | 'worker';
  child: ChildProcess;
  startedAt: number;
  readyAt?: number;
  /** Set before the supervisor kills it (an exit it did not cause is a crash). */
  killed: boolean;
  exit: Promise<number | null>;
  log: string[];
}

export interface ProcessExit {
  name: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
  /** The last lines it logged. */
  tail: string[];
}

export interface World {
  scratch: string;
  sql: postgres.Sql;
  databaseUrl: string;
  postgres?: EmbeddedPostgres;
  model: FakeLlm;
  telegram: FakeTelegram;
  discord: FakeDiscord;
  slack: FakeSlack;
  personaDir: string;
  processes: ParlorProcess[];
  /** Exits the supervisor did not cause. */
  crashes: ProcessExit[];
  /** When each process was started again after a kill (SIGKILL), and its name. */
  restarts: { name: string; at: number }[];
  setModel(handler: FakeHandler): void;
  /** Kills the process with SIGKILL and starts it again at once; resolves once the new one is running. */
  killAndRestart(process: ParlorProcess): Promise<ParlorProcess>;
  /**
   * Stops the process (SIGSTOP: its connections stay open) for `ms`, then lets it run again. Fenced meanwhile, it
   * exits at once (status 1), and is started again as a service manager would. Resolves with its exit status, or
   * 'ran on' when it was not fenced and carried on.
   */
  stopAndResume(process: ParlorProcess, ms: number): Promise<number | null | 'ran on'>;
  /** Restarts Postgres (immediate: as after a crash, or fast); false when the database is not this run's own. */
  restartPostgres(mode: 'immediate' | 'fast'): Promise<boolean>;
  /** Resident memory of each running process (bytes). */
  rss(): Promise<{ name: string; bytes: number }[]>;
  close(): Promise<void>;
}

function envFor(world: { databaseUrl: string; personasDir: string; home: string; model: FakeLlm; telegram: FakeTelegram; discord: FakeDiscord; slack: FakeSlack }): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME ?? '/tmp',
    DATABASE_URL: world.databaseUrl,
    PARLOR_PERSONAS_DIR: world.personasDir,
    PARLOR_HOME: world.home,
    PARLOR_HTTP_PORT: '0',
    LLM_BASE_URL: world.model.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    // A model that keeps failing is given up on well within a run (the chat is told).
    LLM_RETRY_SECONDS: '60',
    // A stalled stream is given up soon, so a run sees it retried.
    LLM_STALL_SECONDS: '5',
    // A stopped process is fenced soon, so a run sees its work taken over.
    PARLOR_HUNG_AFTER_SECONDS: String(HUNG_AFTER_SECONDS),
    TELEGRAM_BOT_TOKEN: TELEGRAM_TOKEN,
    TELEGRAM_API_ROOT: world.telegram.apiRoot,
    DISCORD_BOT_TOKEN: world.discord.token,
    DISCORD_API_URL: world.discord.apiRoot,
    SLACK_BOT_TOKEN: world.slack.botToken,
    SLACK_APP_TOKEN: world.slack.appToken,
    SLACK_API_URL: world.slack.apiUrl,
    LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? 'info',
  };
}

export async function startWorld(options: WorldOptions): Promise<World> {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-faults-'));
  // Traversable by the postgres OS user (root runs Postgres as that user).
  await fs.chmod(scratch, 0o711);
  const given = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  const embedded = given ? undefined : await startEmbeddedPostgres(path.join(scratch, 'pg-home'));
  const adminUrl = given ?? embedded!.url;
  const name = `parlor_faults_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const databaseUrl = urlOfDatabase(adminUrl, name);
  // The Parlor processes reach an embedded server as `parlor start` reaches its own: through its Unix socket.
  const parlorUrl = embedded ? urlOfDatabase(embedded.localUrl, name) : databaseUrl;
  const migrating = await connectDatabase(databaseUrl);
  await migrateDatabase(migrating);
  await migrating.close();
  const sql = postgres(databaseUrl, { max: 2, onnotice: () => {}, connection: { application_name: 'faults-observer' } });

  const model = await startFakeLlm();
  const telegram = await startFakeTelegram({ longPoll: true, chaos: options.telegramChaos });
  const discord = await startFakeDiscord({
    users: options.discordUsers.map((username, i) => ({ id: String(900_000_000_000_000_000n + BigInt(i)), username })),
    rateLimit: { limit: 50, windowMs: 1000 },
  });
  const slack = await startFakeSlack({ pingIntervalMs: 0 });

  const users = [
    ...options.telegramUsers.map((id) => `telegram:${id}`),
    ...options.discordUsers.map((u) => `discord:${discord.user(u).id}`),
    ...options.slackUsers.map((u) => `slack:${u}`),
  ];
  const personasDir = await writePersonas({
    [PERSONA]: {
      soul: 'You are a persona under fault injection.',
      // Its groups: answered when mentioned.
      connectors: {
        users,
        channels: [
          { connector: 'telegram', chat: TELEGRAM_GROUP, mention: true },
          { connector: 'discord', chat: discord.channel('general').id, mention: true },
          { connector: 'slack', chat: SLACK_CHANNEL, mention: true },
        ],
      },
      // `mark` asks first; an approval nobody answers expires within the run.
      tools: { approve: ['mark'], activate: ['mark'], approvalTimeoutSeconds: options.approvalTimeoutSeconds, shell: 'unsandboxed' },
    },
  });
  const personaDir = path.join(personasDir, PERSONA);
  await fs.mkdir(path.join(personaDir, 'tools', 'mark'), { recursive: true });
  await fs.writeFile(
    path.join(personaDir, 'tools', 'mark', 'tool.json'),
    JSON.stringify({
      name: 'mark',
      description: 'Writes a mark for an id into marks.txt.',
      parameters: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string' } } },
      command: 'printf "%s\\n" {{id}} >> marks.txt && printf "marked %s" {{id}}',
    }),
  );
  const home = path.join(scratch, 'home');
  await fs.mkdir(home, { recursive: true });
  const env = envFor({ databaseUrl: parlorUrl, personasDir, home, model, telegram, discord, slack });

  const processes: ParlorProcess[] = [];
  const crashes: ProcessExit[] = [];
  const restarts: { name: string; at: number }[] = [];
  let closing = false;
  const logFile = await fs.open(path.join(scratch, 'parlor.log'), 'a');

  function launch(name: string, role: 'all' | 'worker'): ParlorProcess {
    const child = spawn(bin, ['start', ...(role === 'worker' ? ['--role', 'worker'] : [])], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const entry: ParlorProcess = {
      name,
      role,
      child,
      startedAt: Date.now(),
      killed: false,
      log: [],
      exit: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
    };
    let partial = '';
    const onData = (chunk: Buffer) => {
      const lines = (partial + String(chunk)).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        entry.log.push(line);
        if (entry.log.length > 200) entry.log.shift();
        void logFile.write(`${name} ${line}\n`);
        if (!entry.readyAt && line.includes('Parlor is running')) entry.readyAt = Date.now();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      const index = processes.indexOf(entry);
      if (entry.killed || closing) return;
      crashes.push({ name, code, signal, at: Date.now(), tail: entry.log.slice(-15) });
      // Started again after a second, as a service manager does.
      setTimeout(() => {
        if (!closing && processes[index] === entry) processes[index] = launch(name, role);
      }, 1000);
    });
    return entry;
  }

  processes.push(launch('ingress+worker', 'all'));
  for (let i = 0; i < options.workers; i++) processes.push(launch(`worker${i + 1}`, 'worker'));

  const ready = async (entry: ParlorProcess, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!entry.readyAt) {
      if (Date.now() > deadline) throw new Error(`${entry.name} did not start within ${timeoutMs} ms:\n${entry.log.slice(-20).join('\n')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await Promise.all(processes.map((p) => ready(p, 90_000)));

  /** Starts a process the supervisor ended again, at once; resolves once the new one is running. */
  async function relaunch(entry: ParlorProcess): Promise<ParlorProcess> {
    const index = processes.indexOf(entry);
    const next = launch(entry.name, entry.role);
    if (index >= 0) processes[index] = next;
    // A process that crashes on start is started again by the exit handler; wait for whichever runs.
    const deadline = Date.now() + 90_000;
    while (!processes[index]?.readyAt) {
      if (Date.now() > deadline) throw new Error(`${entry.name} did not come back within 90 s:\n${processes[index]?.log.slice(-20).join('\n')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return processes[index];
  }

  return {
    scratch,
    sql,
    databaseUrl,
    postgres: embedded,
    model,
    telegram,
    discord,
    slack,
    personaDir,
    processes,
    crashes,
    restarts,
    setModel: (handler) => model.setDefault(handler),
    async killAndRestart(entry) {
      entry.killed = true;
      entry.child.kill('SIGKILL');
      await entry.exit;
      const next = await relaunch(entry);
      restarts.push({ name: entry.name, at: next.startedAt });
      return next;
    },
    async stopAndResume(entry, ms) {
      entry.child.kill('SIGSTOP');
      await new Promise((r) => setTimeout(r, ms));
      // Its exit from here on is expected: fenced, it stops at its next heartbeat.
      entry.killed = true;
      entry.child.kill('SIGCONT');
      const exit = await Promise.race([entry.exit, new Promise<'ran on'>((r) => setTimeout(() => r('ran on'), 10_000))]);
      if (exit === 'ran on') entry.killed = false;
      else await relaunch(entry);
      return exit;
    },
    async restartPostgres(mode) {
      if (!embedded) return false;
      await embedded.restart(mode);
      return true;
    },
    async rss() {
      const out: { name: string; bytes: number }[] = [];
      for (const p of processes) {
        if (p.child.exitCode !== null || !p.child.pid) continue;
        const status = await fs.readFile(`/proc/${p.child.pid}/status`, 'utf8').catch(() => '');
        const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
        if (kb) out.push({ name: p.name, bytes: kb * 1024 });
      }
      return out;
    },
    async close() {
      closing = true;
      await Promise.all(
        processes.map(async (p) => {
          if (p.child.exitCode === null && p.child.signalCode === null) {
            p.child.kill('SIGTERM');
            const timer = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
            await p.exit;
            clearTimeout(timer);
          }
        }),
      );
      await logFile.close();
      await sql.end({ timeout: 5 });
      await Promise.allSettled([model.close(), telegram.close(), discord.close(), slack.close()]);
      // A run that went wrong keeps its database with its logs, to be looked into.
      if (!process.env.FAULTS_KEEP) {
        const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
        await cleanup.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
        await cleanup.end();
      }
      await embedded?.release();
      await fs.rm(personasDir, { recursive: true, force: true });
      if (!process.env.FAULTS_KEEP) await fs.rm(scratch, { recursive: true, force: true });
    },
  };
}
