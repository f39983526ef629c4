import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { SQL } from 'drizzle-orm';
import pino from 'pino';
import { startApp, type App, type AppOptions } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import type { Connector } from '../../src/connector.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { startFakeLlm, type FakeLlm } from './fake-llm.ts';
import { createRecordingConnector, type RecordingConnector, type RecordingOptions } from './recording-connector.ts';
import { tempDir } from './temp-dirs.ts';

export interface PersonaFiles {
  soul?: string;
  connectors?: unknown;
  tools?: unknown;
  schedules?: unknown;
  heartbeat?: string;
  /** The persona's `.env` (its secrets). */
  env?: string;
}

/** The default test persona: `chat:u1` may DM it, group `g1` needs a mention, `g2` does not. */
export const TEST_PERSONA: PersonaFiles = {
  soul: 'You are Testy, a test persona.',
  connectors: {
    users: ['chat:u1', 'chat:u2'],
    primary: { connector: 'chat', to: 'u1' },
    channels: [
      { connector: 'chat', chat: 'g1', mention: true },
      { connector: 'chat', chat: 'g2', mention: false },
    ],
  },
};

/** A folder of personas, removed after the test file that wrote it (see temp-dirs.ts). */
export async function writePersonas(personas: Record<string, PersonaFiles>): Promise<string> {
  const dir = await tempDir('parlor-personas-');
  for (const [name, files] of Object.entries(personas)) {
    const p = path.join(dir, name);
    await fs.mkdir(p, { recursive: true });
    await fs.writeFile(path.join(p, 'SOUL.md'), files.soul ?? `You are ${name}.`);
    if (files.connectors) await fs.writeFile(path.join(p, 'connectors.jsonc'), JSON.stringify(files.connectors));
    if (files.tools) await fs.writeFile(path.join(p, 'tools.jsonc'), JSON.stringify(files.tools));
    if (files.schedules) await fs.writeFile(path.join(p, 'schedules.jsonc'), JSON.stringify(files.schedules));
    if (files.heartbeat) await fs.writeFile(path.join(p, 'HEARTBEAT.md'), files.heartbeat);
    if (files.env) await fs.writeFile(path.join(p, '.env'), files.env, { mode: 0o600 });
  }
  return dir;
}

export interface Harness {
  app: App;
  fake: FakeLlm;
  chat: RecordingConnector;
  db: TestDatabase;
  personasDir: string;
  /** PARLOR_HOME: a scratch folder of the harness's own. */
  home: string;
  /** Runs SQL against the test database and returns the rows. */
  query<T>(statement: SQL): Promise<T[]>;
  /** Starts another Parlor instance (another "process") on the same database. */
  startPeer(options?: Partial<AppOptions> & { connectors?: () => Connector[] }): Promise<App>;
  stop(): Promise<void>;
}

export async function startHarness(
  options: {
    personas?: Record<string, PersonaFiles>;
    app?: Partial<AppOptions>;
    env?: Record<string, string>;
    provider?: 'openai' | 'anthropic';
    /** How the recording connector behaves (its capabilities, whether it opens threads). */
    connector?: RecordingOptions;
    /** The URL Parlor reaches the test database by, from the database's own (a proxy in front of it, say). */
    reachDatabase?: (url: string) => Promise<string>;
  } = {},
): Promise<Harness> {
  const db = await createTestDatabase();
  const fake = await startFakeLlm();
  const personasDir = await writePersonas(options.personas ?? { testy: TEST_PERSONA });
  // Parlor's home of its own (mcp.jsonc, outgoing files): nothing of the machine's leaks into a test.
  const home = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-home-'));
  const settings = parseSettings({
    PARLOR_HOME: home,
    DATABASE_URL: options.reachDatabase ? await options.reachDatabase(db.url) : db.url,
    ...(options.provider === 'anthropic'
      ? { LLM_PROVIDER: 'anthropic', LLM_BASE_URL: fake.anthropicBaseUrl, LLM_API_KEY: 'test-key' }
      : { LLM_BASE_URL: fake.openaiBaseUrl }),
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    PARLOR_HTTP_PORT: '0',
    ...options.env,
  });
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const chat = createRecordingConnector('chat', options.connector);
  const base: AppOptions = { settings, log, worker: true, modelRetryDeadlineMs: 1500, connectors: () => [chat] };
  const app = await startApp({ ...base, ...options.app });
  const peers: App[] = [];
  return {
    app,
    fake,
    chat,
    db,
    personasDir,
    home,
    query: async <T>(statement: SQL) => (await app.database.db.execute(statement)) as unknown as T[],
    async startPeer(peerOptions = {}) {
      const peer = await startApp({ ...base, connectors: () => [], remoteConnectors: ['chat'], ...peerOptions });
      peers.push(peer);
      return peer;
    },
    async stop() {
      for (const peer of peers) await peer.stop();
      await app.stop();
      await fake.close();
      await db.drop();
      await fs.rm(personasDir, { recursive: true, force: true });
      await fs.rm(home, { recursive: true, force: true });
    },
  };
}
