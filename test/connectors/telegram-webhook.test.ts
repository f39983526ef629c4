// Webhook mode: Telegram posts updates to Parlor's HTTP server, which checks the secret and answers after commit.
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTelegramConnector, webhookSecret } from '../../connectors/telegram/index.ts';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { curePoison, poisonMessages } from '../support/poison.ts';

const TOKEN = '1:webhook';
let api: FakeTelegram;
let fake: FakeLlm;
let db: TestDatabase;
let app: App;
let url: string;

const update = (id: number, text: string) => ({
  update_id: id,
  message: { message_id: id, date: 0, chat: { id: 7, type: 'private' }, from: { id: 7, is_bot: false, first_name: 'Ana' }, text },
});

beforeAll(async () => {
  api = await startFakeTelegram();
  fake = await startFakeLlm();
  db = await createTestDatabase();
  const settings = parseSettings({
    DATABASE_URL: db.url,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: await writePersonas({ tg: { connectors: { users: ['telegram:7'] } } }),
    PARLOR_HTTP_PORT: '0',
  });
  const log = pino({ level: 'silent' });
  app = await startApp({
    settings,
    log,
    http: true,
    connectors: () => [createTelegramConnector({ token: TOKEN, apiRoot: api.apiRoot, webhookUrl: 'https://parlor.example.com', log })],
  });
  url = `http://127.0.0.1:${app.http!.port}/telegram/webhook`;
});
afterAll(async () => {
  await app?.stop();
  await api?.close();
  await fake?.close();
  await db?.drop();
});

const post = (body: unknown, secret?: string) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(secret ? { 'x-telegram-bot-api-secret-token': secret } : {}) }, body: JSON.stringify(body) });

describe('Telegram webhook mode', () => {
  it('registers the webhook with a secret instead of polling', () => {
    expect(api.callsOf('setWebhook')[0].body).toMatchObject({ url: 'https://parlor.example.com/telegram/webhook', secret_token: webhookSecret(TOKEN) });
    expect(api.callsOf('getUpdates')).toHaveLength(0);
  });

  it('refuses a request with a wrong or missing secret with 401 and stores nothing', async () => {
    expect((await post(update(1, 'forged'), 'wrong-secret')).status).toBe(401);
    expect((await post(update(2, 'forged too'))).status).toBe(401);
    const [row] = (await app.database.db.execute(sql`select count(*)::int as n from inbound_events`)) as unknown as { n: number }[];
    expect(row.n).toBe(0);
    expect(fake.requests).toHaveLength(0);
  });

  it('answers 200 only after the update is stored, and the persona replies', async () => {
    const response = await post(update(3, 'hello by webhook'), webhookSecret(TOKEN));
    expect(response.status).toBe(200);
    const [row] = (await app.database.db.execute(sql`select count(*)::int as n from inbound_events where external_id = '3'`)) as unknown as { n: number }[];
    expect(row.n).toBe(1);
    await app.waitForIdle('tg:telegram:7');
    expect(api.callsOf('sendMessage').map((c) => c.body.text)).toEqual(['echo: hello by webhook']);
    // Telegram retrying the same update changes nothing.
    expect((await post(update(3, 'hello by webhook'), webhookSecret(TOKEN))).status).toBe(200);
    await app.waitForIdle('tg:telegram:7');
    expect(api.callsOf('sendMessage')).toHaveLength(1);
  });

  it('answers 500 to an update that cannot be stored, so Telegram retries it, and 200 once it is dead-lettered on the third try', async () => {
    await poisonMessages(app.database.db);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await post(update(20, 'a poison pill'), webhookSecret(TOKEN))).status);
      expect(statuses).toEqual([500, 500, 200, 200]);
      const [failure] = (await app.database.db.execute(
        sql`select attempts, dead_lettered, last_error from inbound_failures where connector = 'telegram' and external_id = '20'`,
      )) as unknown as { attempts: number; dead_lettered: boolean; last_error: string }[];
      expect(failure).toMatchObject({ attempts: 4, dead_lettered: true });
      expect(failure.last_error).toContain('poisoned message');
    } finally {
      await curePoison(app.database.db);
    }
    // A NUL no longer breaks the insert: stored without it, and answered.
    expect((await post(update(21, 'with a nul\u0000 inside'), webhookSecret(TOKEN))).status).toBe(200);
    await app.waitForIdle('tg:telegram:7');
    expect(api.callsOf('sendMessage').map((c) => c.body.text)).toContain('echo: with a nul inside');
  });
});
