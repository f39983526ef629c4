// Slack in the connector registry: its settings, `parlor doctor`'s check (token, Socket Mode, scopes), and
// `parlor start` building it from SLACK_* variables, in Socket Mode and in HTTP mode, as a child process.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { BOT_SCOPES, slackEntry, type SlackSettings } from '../../connectors/slack/entry.ts';
import { createSlackConnector } from '../../connectors/slack/index.ts';
import { parseSettings } from '../../src/config/env.ts';
import { CONNECTORS } from '../../connectors/registry.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { signedRequest, startFakeSlack, type FakeSlack } from '../support/fake-slack.ts';
import { writePersonas } from '../support/harness.ts';
import { freePort } from '../support/net.ts';
import { until } from '../support/until.ts';

const read = (env: Record<string, string>) => parseSettings({ LLM_BASE_URL: 'http://127.0.0.1:1/v1', LLM_MODEL: 'm', ...env }, process.cwd(), CONNECTORS).connectors.slack as SlackSettings | undefined;
const getJson = async (url: string, headers: Record<string, string>) => (await fetch(url, { headers })).json();

describe('Slack settings', () => {
  it('is off without SLACK_BOT_TOKEN; Socket Mode with an app token, HTTP with a signing secret', () => {
    expect(read({})).toBeUndefined();
    expect(read({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1', SLACK_API_URL: 'http://127.0.0.1:9/api/' })).toEqual({
      botToken: 'xoxb-1',
      appToken: 'xapp-1',
      signingSecret: undefined,
      apiUrl: 'http://127.0.0.1:9/api',
    });
    expect(slackEntry.multiProcess(read({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_SIGNING_SECRET: 's' })!)).toBe(true);
    expect(slackEntry.multiProcess(read({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1' })!)).toBe(false);
  });

  it('names the variable and what to put there when a token is of the wrong kind', () => {
    expect(() => read({ SLACK_BOT_TOKEN: 'xapp-1', SLACK_APP_TOKEN: 'xapp-1' })).toThrow(/SLACK_BOT_TOKEN should be the Bot User OAuth Token \(xoxb-/);
    expect(() => read({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xoxb-2' })).toThrow(/SLACK_APP_TOKEN should be an app-level token \(xapp-/);
    expect(() => read({ SLACK_BOT_TOKEN: 'xoxb-1' })).toThrow(/neither SLACK_APP_TOKEN \(Socket Mode\) nor SLACK_SIGNING_SECRET/);
  });
});

describe('connectors/slack/manifest.json', () => {
  it('is a paste-ready app: DMs open in App Home, the scopes doctor checks, the bot events, interactivity, Socket Mode', async () => {
    const manifest = JSON.parse(await fs.readFile(new URL('../../connectors/slack/manifest.json', import.meta.url), 'utf8'));
    expect(manifest.features.app_home).toMatchObject({ messages_tab_enabled: true, messages_tab_read_only_enabled: false });
    expect(manifest.features.bot_user.display_name).toBeTruthy();
    expect(manifest.oauth_config.scopes.bot).toEqual([...BOT_SCOPES]);
    expect(manifest.settings.event_subscriptions.bot_events.sort()).toEqual(['app_mention', 'message.channels', 'message.groups', 'message.im', 'message.mpim', 'reaction_added']);
    expect(manifest.settings).toMatchObject({ interactivity: { is_enabled: true }, socket_mode_enabled: true });
  });
});

describe('parlor doctor for Slack', () => {
  let fake: FakeSlack;
  let partial: FakeSlack;
  beforeAll(async () => {
    fake = await startFakeSlack({ scopes: [...BOT_SCOPES, 'commands'] });
    partial = await startFakeSlack({ scopes: BOT_SCOPES.filter((s) => s !== 'reactions:write' && s !== 'files:read') });
  });
  afterAll(async () => {
    await fake?.close();
    await partial?.close();
  });
  const settings = (f: FakeSlack, extra: Partial<SlackSettings> = {}): SlackSettings => ({ botToken: f.botToken, apiUrl: f.apiUrl.replace(/\/$/, ''), ...extra });

  it('checks the token, Socket Mode with the app token, and the scopes', async () => {
    expect(await slackEntry.doctor(settings(fake, { appToken: fake.appToken }), getJson)).toBe('bot parlor in Parlor Test (Socket Mode: one process; all scopes granted)');
    expect(fake.callsOf('apps.connections.open').map((c) => c.token)).toEqual([fake.appToken]);
    expect(await slackEntry.doctor(settings(fake, { signingSecret: 's' }), getJson)).toMatch(/HTTP events at \/slack\/events: several processes may serve it; set the Request URL/);
  });

  it('names the scopes the token lacks', async () => {
    await expect(slackEntry.doctor(settings(partial, { appToken: partial.appToken }), getJson)).rejects.toThrow(
      'the bot token lacks reactions:write, files:read; add them under OAuth & Permissions (or create the app from connectors/slack/manifest.json) and reinstall the app',
    );
  });

  it('says a refused bot token or app token is refused', async () => {
    await expect(slackEntry.doctor({ ...settings(fake), botToken: 'xoxb-wrong', appToken: fake.appToken }, getJson)).rejects.toThrow(/token refused \(invalid_auth\)/);
    await expect(slackEntry.doctor(settings(fake, { appToken: 'xapp-wrong' }), getJson)).rejects.toThrow(/SLACK_APP_TOKEN refused for Socket Mode \(invalid_auth\)/);
    await expect(slackEntry.doctor({ botToken: 'xoxb-1', apiUrl: 'http://127.0.0.1:9/api', signingSecret: 's' }, getJson)).rejects.toThrow(/cannot reach http:\/\/127.0.0.1:9 .*check SLACK_API_URL/);
  });
});

describe('the connector starting', () => {
  let fake: FakeSlack;
  beforeAll(async () => {
    fake = await startFakeSlack();
  });
  afterAll(() => fake?.close());
  const log = pino({ level: 'silent' });
  const ignore = async () => ({ status: 'ignored' as const });

  it('stops start-up with what to do when Slack refuses the bot token or the app token', async () => {
    const wrongBot = createSlackConnector({ botToken: 'xoxb-wrong', appToken: fake.appToken, apiUrl: fake.apiUrl, log });
    await expect(wrongBot.start(ignore)).rejects.toThrow(/^SLACK_BOT_TOKEN was refused by Slack \(invalid_auth\); set it to the Bot User OAuth Token/);
    await wrongBot.stop();
    const wrongApp = createSlackConnector({ botToken: fake.botToken, appToken: 'xapp-wrong', apiUrl: fake.apiUrl, log });
    await expect(wrongApp.start(ignore)).rejects.toThrow(/^SLACK_APP_TOKEN was refused by Slack \(invalid_auth\)/);
    await wrongApp.stop();
    expect(fake.openConnections()).toBe(0);
  });

  it('runs when Slack cannot be reached, says so in its status, keeps trying, and stops at once', async () => {
    const connector = createSlackConnector({ botToken: fake.botToken, signingSecret: 's', apiUrl: 'http://127.0.0.1:9/api', log, retries: { retries: 0, minTimeout: 10, maxTimeout: 10 } });
    await connector.start(ignore);
    expect(connector.status?.()).toMatchObject({ state: 'down' });
    expect(connector.status?.().detail).toMatch(/ECONNREFUSED|fetch failed|request/i);
    const stopping = Date.now();
    await connector.stop();
    expect(Date.now() - stopping).toBeLessThan(1000);
  });
});

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('parlor start with SLACK_* set', () => {
  let fake: FakeSlack;
  let llm: FakeLlm;
  let db: TestDatabase;
  let personas: string;
  const children: ResultPromise[] = [];

  beforeAll(async () => {
    fake = await startFakeSlack();
    llm = await startFakeLlm();
    db = await createTestDatabase();
    personas = await writePersonas({ helper: { connectors: { users: ['slack:U0OWNER'] } } });
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await fake?.close();
    await llm?.close();
    await db?.drop();
    if (personas) await fs.rm(personas, { recursive: true, force: true });
  });

  async function start(slack: Record<string, string>) {
    const port = await freePort();
    const child = execa('node', [path.join(root, 'bin/parlor.js'), 'start'], {
      cwd: root,
      env: {
        PATH: process.env.PATH!,
        HOME: process.env.HOME ?? root,
        DATABASE_URL: db.url,
        PARLOR_PERSONAS_DIR: personas,
        LLM_BASE_URL: llm.openaiBaseUrl,
        LLM_MODEL: 'fake-model',
        PARLOR_HTTP_PORT: String(port),
        LOG_LEVEL: 'info',
        SLACK_BOT_TOKEN: fake.botToken,
        SLACK_API_URL: fake.apiUrl,
        ...slack,
      },
      extendEnv: false,
      reject: false,
      timeout: 90_000,
    });
    children.push(child);
    const health = await until(async () => {
      if (child.exitCode !== null) throw new Error(`parlor start exited: ${(await child).stderr}`);
      const res = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
      return res?.ok ? ((await res.json()) as Record<string, any>) : undefined;
    }, 'parlor start to be healthy', 60_000);
    return { child, port, health };
  }

  it('Socket Mode: connects through SLACK_API_URL with the app token and answers a DM', async () => {
    const { child, health } = await start({ SLACK_APP_TOKEN: fake.appToken });
    expect(health.connectors.slack).toEqual({ state: 'up' });
    expect(fake.openConnections()).toBe(1);
    await fake.dm({ user: 'U0OWNER', text: 'hello from Slack' });
    await until(() => fake.messages('D0OWNER').some((m) => m.text === 'echo: hello from Slack'), 'the reply', 20_000);
    child.kill('SIGINT');
    expect((await child).exitCode).toBe(0);
  }, 90_000);

  it('HTTP mode: serves POST /slack/events with the signing secret and answers a DM', async () => {
    fake.reset();
    const secret = 'start-test-secret';
    const { child, port } = await start({ SLACK_SIGNING_SECRET: secret });
    const event = { type: 'message', channel: 'D0OWNER', channel_type: 'im', user: 'U0OWNER', text: 'hello over HTTP', ts: '1700002000.000100', event_ts: '1700002000.000100' };
    const request = signedRequest(fake.eventCallback(event), secret);
    const response = await fetch(`http://127.0.0.1:${port}/slack/events`, { method: 'POST', headers: request.headers, body: request.body });
    expect(response.status).toBe(200);
    await until(() => fake.messages('D0OWNER').some((m) => m.text === 'echo: hello over HTTP'), 'the reply', 20_000);
    const forged = signedRequest(fake.eventCallback({ ...event, ts: '1700002000.000200' }), 'wrong');
    expect((await fetch(`http://127.0.0.1:${port}/slack/events`, { method: 'POST', headers: forged.headers, body: forged.body })).status).toBe(401);
    child.kill('SIGINT');
    expect((await child).exitCode).toBe(0);
  }, 90_000);
});
