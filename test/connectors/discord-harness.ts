// The Discord tests' set-up: the fake Discord, the real connector inside the real app (test database, fake model),
// and one persona: Ana (owner, approver) and Bo (a user, not an approver) may DM it; it answers in #team when
// mentioned (threads under #team too) and in #open without a mention; #elsewhere is nobody's.
import fs from 'node:fs/promises';
import { sql, type SQL } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { createDiscordConnector, type DiscordOptions } from '../../connectors/discord/index.ts';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import type { Connector } from '../../src/connector.ts';
import { chatConversationId } from '../../src/conversation-id.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeDiscord, type FakeDiscord, type FakeDiscordOptions, type GatewayFrame } from '../support/fake-discord.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';

export const PERSONA = 'dsc';

export interface DiscordHarness {
  fake: FakeDiscord;
  llm: FakeLlm;
  app: App;
  db: TestDatabase;
  personasDir: string;
  /** Lines the app logged (JSON), warnings and up. */
  logs: string[];
  connector: Connector;
  /** The conversation of a channel (by name or id) or a person's DM, and a thread under it. */
  conversation(where: { dm: string } | { channel: string; thread?: string }): string;
  query<T>(statement: SQL): Promise<T[]>;
  /**
   * A new connector in place of the running one, as a restarted process would have; `meanwhile` runs while neither
   * is connected (the old one's session ended).
   */
  restartConnector(meanwhile?: () => unknown): Promise<void>;
  stop(): Promise<void>;
}

export const DISCORD_USERS = [
  { username: 'ana', global_name: 'Ana' },
  { username: 'bo', global_name: 'Bo' },
  { username: 'eve', global_name: 'Eve' },
  { username: 'otherbot', global_name: 'Other Bot', bot: true },
];

export const DISCORD_GUILD = {
  name: 'Parlor Test',
  channels: [
    { name: 'Text Channels', type: 4 },
    { name: 'team', parent: 'Text Channels' },
    { name: 'open', parent: 'Text Channels' },
    { name: 'elsewhere', parent: 'Text Channels' },
  ],
  roles: [{ name: 'moderators', mentionable: true }],
};

/**
 * The harness of a test file: started before its tests, stopped after them, the fake model's script cleared before
 * each. The object is filled in when the file's tests start.
 */
export function useDiscordHarness(options?: Parameters<typeof startDiscordHarness>[0]): DiscordHarness {
  const h = {} as DiscordHarness;
  beforeAll(async () => {
    Object.assign(h, await startDiscordHarness(options));
  });
  afterAll(async () => {
    await h.stop?.();
  });
  beforeEach(() => {
    h.llm.reset();
  });
  return h;
}

export async function startDiscordHarness(
  options: { fake?: FakeDiscordOptions; connector?: Partial<DiscordOptions>; tools?: unknown } = {},
): Promise<DiscordHarness> {
  const fake = await startFakeDiscord({ users: DISCORD_USERS, guilds: [DISCORD_GUILD], ...options.fake });
  const llm = await startFakeLlm();
  const db = await createTestDatabase();
  const id = (name: string) => fake.user(name).id;
  const personasDir = await writePersonas({
    [PERSONA]: {
      connectors: {
        users: [`discord:${id('ana')}`, `discord:${id('bo')}`],
        approvers: [`discord:${id('ana')}`],
        primary: { connector: 'discord', to: id('ana') },
        channels: [
          { connector: 'discord', chat: fake.channel('team').id, mention: true },
          { connector: 'discord', chat: fake.channel('open').id, mention: false },
        ],
      },
      tools: options.tools ?? { approve: ['react'], approvalTimeoutSeconds: 30 },
    },
  });
  const settings = parseSettings({ DATABASE_URL: db.url, LLM_BASE_URL: llm.openaiBaseUrl, LLM_MODEL: 'fake-model', PARLOR_PERSONAS_DIR: personasDir });
  const logs: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void logs.push(line) });
  const make = () => createDiscordConnector({ token: fake.token, apiUrl: fake.apiRoot, messageContent: true, log, ...options.connector });
  let inner = make();
  let started: Parameters<Connector['start']>;
  // The app holds this one; a restart swaps the connector behind it.
  const connector: Connector = {
    id: 'discord',
    get capabilities() {
      return inner.capabilities;
    },
    start: (...args) => ((started = args), inner.start(...args)),
    stop: () => inner.stop(),
    send: (m) => inner.send(m),
    edit: (...a) => inner.edit!(...a),
    react: (...a) => inner.react!(...a),
    typing: (...a) => inner.typing!(...a),
    download: (...a) => inner.download!(...a),
    draft: (t) => inner.draft!(t),
    status: () => inner.status!(),
  };
  const app = await startApp({ settings, log, questionSweepMs: 200, modelRetryDeadlineMs: 1500, connectors: () => [connector] });
  return {
    fake,
    llm,
    app,
    db,
    personasDir,
    logs,
    connector,
    conversation(where) {
      if ('dm' in where) return chatConversationId(PERSONA, 'discord', fake.dmChannel(where.dm));
      return chatConversationId(PERSONA, 'discord', fake.channel(where.channel).id, where.thread && fake.channel(where.thread).id);
    },
    query: async <T>(statement: SQL) => (await app.database.db.execute(statement)) as unknown as T[],
    async restartConnector(meanwhile) {
      await inner.stop();
      await meanwhile?.();
      inner = make();
      await inner.start(...started);
    },
    async stop() {
      await app.stop();
      await fake.close();
      await llm.close();
      await db.drop();
      await fs.rm(personasDir, { recursive: true, force: true });
    },
  };
}

/** The inbound events the core stored for Discord, by external id. */
export async function storedEvents(h: DiscordHarness): Promise<string[]> {
  const rows = await h.query<{ external_id: string }>(sql`select external_id from inbound_events where connector = 'discord' order by external_id`);
  return rows.map((r) => r.external_id);
}

/**
 * Runs `fn` once, right after Discord has said READY to the next session that starts (before discord.js is ready,
 * its guilds still coming): what a person posts at that moment. `fired` tells whether it ran; `restore` puts the
 * fake back.
 */
export function atNextReady(fake: FakeDiscord, fn: () => void): { fired(): boolean; restore(): void } {
  const push = fake.frames.push.bind(fake.frames);
  let fired = false;
  fake.frames.push = (...frames: GatewayFrame[]) => {
    const n = push(...frames);
    if (!fired && frames.some((f) => f.direction === 'out' && f.t === 'READY')) {
      fired = true;
      // The fake records a frame before it sends it: what `fn` posts goes out after the READY, as on Discord.
      setImmediate(fn);
    }
    return n;
  };
  return { fired: () => fired, restore: () => void (fake.frames.push = push) };
}
