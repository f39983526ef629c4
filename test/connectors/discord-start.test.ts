// `parlor start` and `parlor doctor` with DISCORD_BOT_TOKEN and DISCORD_API_URL: the registry entry builds the
// connector, which answers a DM on the fake Discord; doctor checks the token and the Message Content intent. Also
// the entry's reading of its variables.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discordEntry } from '../../connectors/discord/entry.ts';
import { MESSAGE_CONTENT_REFUSED } from '../../connectors/discord/intents.ts';
import { settingsReader } from '../../src/config/env.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { Intent, startFakeDiscord, type FakeDiscord } from '../support/fake-discord.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { freePort } from '../support/net.ts';
import { until } from '../support/until.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');

describe('the Discord registry entry', () => {
  const parse = (env: Record<string, string>) => discordEntry.parse(settingsReader(env));

  it('starts when DISCORD_BOT_TOKEN is set, takes DISCORD_API_URL with or without its version, and asks for Message Content only when told', () => {
    expect(parse({})).toBeUndefined();
    expect(parse({ DISCORD_BOT_TOKEN: 'abc.def.ghi' })).toEqual({ token: 'abc.def.ghi' });
    expect(parse({ DISCORD_BOT_TOKEN: 'Bot abc.def.ghi', DISCORD_API_URL: 'http://127.0.0.1:9/api/v10/', DISCORD_MESSAGE_CONTENT: 'true' })).toEqual({
      token: 'abc.def.ghi',
      apiUrl: 'http://127.0.0.1:9/api',
      messageContent: true,
    });
    expect(() => parse({ DISCORD_BOT_TOKEN: 'x', DISCORD_MESSAGE_CONTENT: 'sometimes' })).toThrow(/DISCORD_MESSAGE_CONTENT=sometimes is not true or false/);
    expect(() => parse({ DISCORD_BOT_TOKEN: 'x', DISCORD_API_URL: 'discord.com/api' })).toThrow(/DISCORD_API_URL/);
    expect(discordEntry.variables).toEqual(['DISCORD_BOT_TOKEN', 'DISCORD_API_URL', 'DISCORD_MESSAGE_CONTENT']);
    expect(discordEntry.multiProcess({ token: 'x' })).toBe(false);
  });
});

describe('parlor start and doctor with Discord', () => {
  let fake: FakeDiscord;
  let strict: FakeDiscord;
  let llm: FakeLlm;
  let db: TestDatabase;
  let personasDir: string;
  let env: Record<string, string>;
  const children: ResultPromise[] = [];

  beforeAll(async () => {
    fake = await startFakeDiscord();
    strict = await startFakeDiscord({ refuseIntents: Intent.MessageContent });
    llm = await startFakeLlm();
    db = await createTestDatabase();
    personasDir = await writePersonas({ helper: { connectors: { users: [`discord:${fake.user('alice').id}`], primary: { connector: 'discord', to: fake.user('alice').id } } } });
    env = {
      PATH: process.env.PATH!,
      HOME: process.env.HOME ?? root,
      DATABASE_URL: db.url,
      LLM_BASE_URL: llm.openaiBaseUrl,
      LLM_MODEL: 'fake-model',
      PARLOR_PERSONAS_DIR: personasDir,
      PARLOR_FROM_SOURCE: '1',
      LOG_LEVEL: 'info',
      DISCORD_BOT_TOKEN: fake.token,
      DISCORD_API_URL: fake.apiRoot,
    };
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await fake?.close();
    await strict?.close();
    await llm?.close();
    await db?.drop();
    if (personasDir) await fs.rm(personasDir, { recursive: true, force: true });
  });

  it('parlor start builds the connector from the registry entry: it connects, answers a DM, reports up, and stops on Ctrl-C', async () => {
    const port = await freePort();
    const child = execa('node', [bin, 'start'], { cwd: root, env: { ...env, PARLOR_HTTP_PORT: String(port) }, extendEnv: false, reject: false, timeout: 90_000 });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    await until(() => fake.sessions().length === 1 || child.exitCode !== null, 60_000);
    expect(child.exitCode).toBeNull();
    fake.sendDm({ from: 'alice', content: 'hello from Discord' });
    await until(() => fake.messages(fake.dmChannel('alice')).find((m) => m.content === 'echo: hello from Discord'), () => `the answer; the process said ${out}`, 60_000);
    const health = (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as { connectors: Record<string, unknown> };
    expect(health.connectors).toEqual({ discord: { state: 'up' } });
    expect(out).toContain('connected to the Discord gateway');
    expect(out).not.toContain('has no discord connector yet');
    child.kill('SIGINT');
    expect((await child).exitCode).toBe(0);
    await until(() => fake.sessions().length === 0, 'the gateway session to end');
  }, 120_000);

  it('parlor doctor checks the token and says what to do when the Message Content intent is not enabled', async () => {
    const good = await execa('node', [bin, 'doctor'], { cwd: root, env, extendEnv: false, reject: false, timeout: 90_000 });
    expect(good.stdout).toContain('✓ discord: bot parlor (mentions, replies and DMs only: DISCORD_MESSAGE_CONTENT is not set)');
    const refused = await execa('node', [bin, 'doctor'], {
      cwd: root,
      env: { ...env, DISCORD_BOT_TOKEN: strict.token, DISCORD_API_URL: strict.apiRoot, DISCORD_MESSAGE_CONTENT: 'true' },
      extendEnv: false,
      reject: false,
      timeout: 90_000,
    });
    expect(refused.stdout).toContain(`✗ discord: ${MESSAGE_CONTENT_REFUSED}`);
    expect(refused.exitCode).toBe(1);
    const wrong = await execa('node', [bin, 'doctor'], { cwd: root, env: { ...env, DISCORD_BOT_TOKEN: 'wrong' }, extendEnv: false, reject: false, timeout: 90_000 });
    expect(wrong.stdout).toMatch(/✗ discord: token refused; .*Reset Token/);
  }, 120_000);
});
