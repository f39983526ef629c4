// Telegram end to end against telegram-test-api, a Bot API emulator: real grammY client, real pipeline.
import pino from 'pino';
import { TelegramServer } from 'telegram-test-api/lib/telegramServer.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { freePort } from '../support/net.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';

const TOKEN = '123456:TEST-token';
const OWNER = 1001;
const STRANGER = 2002;
const GROUP = -100777;
const OTHER_GROUP = -100888;
const BOT_ID = 666; // what the emulator's getMe answers

let server: TelegramServer;
let fake: FakeLlm;
let db: TestDatabase;
let app: App;


/** What the bot sent to a chat, oldest first. */
function sentTo(chat: number) {
  return server.storage.botMessages.filter((m) => Number(m.message.chat_id) === chat).map((m) => m.message as { text: string; parse_mode?: string; reply_parameters?: { message_id: number } });
}

async function waitForBotMessages(chat: number, n: number, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (sentTo(chat).length < n) {
    if (Date.now() > deadline) throw new Error(`expected ${n} messages to ${chat}, got ${JSON.stringify(sentTo(chat).map((m) => m.text))}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return sentTo(chat);
}

function client(options: { userId: number; chatId: number; type?: 'private' | 'group' | 'supergroup' }) {
  return server.getClient(TOKEN, { userId: options.userId, chatId: options.chatId, type: options.type ?? 'private', firstName: 'Ana', userName: 'ana' });
}

beforeAll(async () => {
  server = new TelegramServer({ port: await freePort(), host: '127.0.0.1', storeTimeout: 60 });
  await server.start();
  fake = await startFakeLlm();
  db = await createTestDatabase();
  const personasDir = await writePersonas({
    tg: {
      soul: 'You are a Telegram test persona.',
      connectors: {
        users: [`telegram:${OWNER}`],
        primary: { connector: 'telegram', to: String(OWNER) },
        channels: [{ connector: 'telegram', chat: String(GROUP), mention: true }],
      },
    },
  });
  settings = parseSettings({
    DATABASE_URL: db.url,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: server.config.apiURL,
  });
  app = await start();
});

let settings: ReturnType<typeof parseSettings>;

function start(): Promise<App> {
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  return startApp({
    settings,
    log,
    connectors: () => [createTelegramConnector({ token: TOKEN, apiRoot: server.config.apiURL, log, pollTimeoutSeconds: 0 })],
  });
}

afterAll(async () => {
  await app?.stop();
  await server?.stop();
  await fake?.close();
  await db?.drop();
});

beforeEach(() => {
  fake.reset();
  server.storage.botMessages.length = 0;
});

describe('Telegram DMs', () => {
  it('an owner gets the persona\'s reply', async () => {
    const ana = client({ userId: OWNER, chatId: OWNER });
    await ana.sendMessage(ana.makeMessage('hello from telegram'));
    const [reply] = await waitForBotMessages(OWNER, 1);
    expect(reply.text).toBe('echo: hello from telegram');
    expect(reply.parse_mode).toBe('HTML');
  });

  it('a stranger gets one refusal naming their id, and no model request is made', async () => {
    const stranger = client({ userId: STRANGER, chatId: STRANGER });
    await stranger.sendMessage(stranger.makeMessage('let me in'));
    const [refusal] = await waitForBotMessages(STRANGER, 1);
    expect(refusal.text).toContain(`telegram:${STRANGER}`);
    await stranger.sendMessage(stranger.makeMessage('hello?'));
    await new Promise((r) => setTimeout(r, 800));
    expect(sentTo(STRANGER)).toHaveLength(1);
    expect(fake.requests).toHaveLength(0);
  });

  it('a 10,000-character answer arrives as 3 messages in order, none over 4096', async () => {
    const long = Array.from({ length: 100 }, (_, i) => `Paragraph ${String(i).padStart(3, '0')}: ${'lorem ipsum '.repeat(7)}`).join('\n\n');
    expect(long.length).toBeGreaterThan(10_000);
    fake.script({ text: long });
    const ana = client({ userId: OWNER, chatId: OWNER });
    await ana.sendMessage(ana.makeMessage('write a lot'));
    const parts = await waitForBotMessages(OWNER, 3);
    await new Promise((r) => setTimeout(r, 300));
    expect(sentTo(OWNER)).toHaveLength(3);
    expect(parts.every((p) => p.text.length <= 4096)).toBe(true);
    const joined = parts.map((p) => p.text).join('\n\n');
    const numbers = [...joined.matchAll(/Paragraph (\d{3})/g)].map((m) => Number(m[1]));
    expect(numbers).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it('the model\'s Markdown is sent as Telegram HTML', async () => {
    fake.script({ text: '**Bold** and `code` <b>not a tag</b>' });
    const ana = client({ userId: OWNER, chatId: OWNER });
    await ana.sendMessage(ana.makeMessage('format please'));
    const [reply] = await waitForBotMessages(OWNER, 1);
    expect(reply.text).toBe('<b>Bold</b> and <code>code</code> &lt;b&gt;not a tag&lt;/b&gt;');
  });
});

describe('Telegram groups', () => {
  it('stays quiet without a mention, answers a mention as a reply, and answers a reply to the bot', async () => {
    const group = client({ userId: OWNER, chatId: GROUP, type: 'supergroup' });
    await group.sendMessage(group.makeMessage('just chatting, @TestNameBotty is someone else'));
    await new Promise((r) => setTimeout(r, 800));
    expect(sentTo(GROUP)).toHaveLength(0);

    const text = '@TestNameBot what is up';
    await group.sendMessage(group.makeMessage(text, { entities: [{ type: 'mention', offset: 0, length: 12 }] }));
    const [reply] = await waitForBotMessages(GROUP, 1);
    expect(reply.text).toBe(`echo: [Ana (telegram:${OWNER})] ${text}`);
    const asked = server.storage.userMessages.find((u) => 'message' in u && (u.message as { text?: string }).text === text)!;
    expect(reply.reply_parameters?.message_id).toBe(asked.messageId);

    await group.sendMessage(group.makeMessage('and you?', { reply_to_message: { message_id: 1, chat: { id: GROUP, type: 'supergroup', title: 'g' }, from: { id: BOT_ID, is_bot: true, first_name: 'Bot' }, date: 0 } } as never));
    await waitForBotMessages(GROUP, 2);
  });

  it('ignores groups no persona owns, even when mentioned', async () => {
    const other = client({ userId: OWNER, chatId: OTHER_GROUP, type: 'supergroup' });
    await other.sendMessage(other.makeMessage('@TestNameBot hi', { entities: [{ type: 'mention', offset: 0, length: 12 }] }));
    await new Promise((r) => setTimeout(r, 800));
    expect(sentTo(OTHER_GROUP)).toHaveLength(0);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('Telegram buttons', () => {
  it('renders a question as an inline keyboard and removes it when the question is settled', async () => {
    const telegram = app.connectors.get('telegram')!;
    const sent = await telegram.send({
      chat: String(OWNER),
      text: 'Run `rm -rf build/`?',
      buttons: [[{ label: 'Allow once', data: 'q:AbC123:once' }, { label: 'Always allow', data: 'q:AbC123:always' }, { label: 'Deny', data: 'q:AbC123:deny' }]],
    });
    const [question] = await waitForBotMessages(OWNER, 1);
    expect((question as { reply_markup?: unknown }).reply_markup).toEqual({
      inline_keyboard: [[{ text: 'Allow once', callback_data: 'q:AbC123:once' }, { text: 'Always allow', callback_data: 'q:AbC123:always' }, { text: 'Deny', callback_data: 'q:AbC123:deny' }]],
    });
    await telegram.edit!(String(OWNER), sent.ids[0], 'Run `rm -rf build/`? — Allowed once by @ana');
    const [edited] = sentTo(OWNER);
    expect(edited.text).toBe('Run <code>rm -rf build/</code>? — Allowed once by @ana');
    expect((edited as { reply_markup?: { inline_keyboard: unknown[] } }).reply_markup?.inline_keyboard).toEqual([]);
  });

  it('refuses a button payload over Telegram\'s 64 bytes', async () => {
    const telegram = app.connectors.get('telegram')!;
    await expect(telegram.send({ chat: String(OWNER), text: 'x', buttons: [[{ label: 'x', data: 'q:' + 'x'.repeat(70) }]] })).rejects.toThrow(/64-byte/);
  });
});

describe('Telegram reminders', () => {
  it('a reminder 2 s ahead is delivered to the chat that asked, once', async () => {
    fake.script({ toolCalls: [{ name: 'remind', arguments: { action: 'remind', prompt: 'Time to call Sam', in_seconds: 2 } }] }, { text: 'I will remind you.' });
    fake.setDefault((req) =>
      req.lastUserText.startsWith('[reminder')
        ? { toolCalls: [{ name: 'reply_to_origin', arguments: { text: '⏰ Call Sam now.' } }, { name: 'end_task', arguments: { status: 'ok' } }] }
        : { text: `echo: ${req.lastUserText}` },
    );
    const ana = client({ userId: OWNER, chatId: OWNER });
    const asked = Date.now();
    await ana.sendMessage(ana.makeMessage('remind me in 2 seconds to call Sam'));
    await waitForBotMessages(OWNER, 1);
    expect(sentTo(OWNER)[0].text).toBe('I will remind you.');
    const [, reminder] = await waitForBotMessages(OWNER, 2);
    expect(reminder.text).toBe('⏰ Call Sam now.');
    expect(Date.now() - asked).toBeGreaterThanOrEqual(2000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(sentTo(OWNER)).toHaveLength(2);
  });

  it('a reminder that falls due while Parlor is stopped is delivered once when it starts again', async () => {
    fake.script({ toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'across-restart', prompt: 'Stretch', in_seconds: 2 } }] }, { text: 'Noted.' });
    fake.setDefault((req) =>
      req.lastUserText.startsWith('[reminder')
        ? { toolCalls: [{ name: 'reply_to_origin', arguments: { text: '⏰ Stretch!' } }, { name: 'end_task', arguments: { status: 'ok' } }] }
        : { text: `echo: ${req.lastUserText}` },
    );
    const ana = client({ userId: OWNER, chatId: OWNER });
    await ana.sendMessage(ana.makeMessage('remind me to stretch in 2 seconds'));
    await waitForBotMessages(OWNER, 1);
    await app.stop();
    await new Promise((r) => setTimeout(r, 3000));
    expect(sentTo(OWNER)).toHaveLength(1);
    app = await start();
    const [, reminder] = await waitForBotMessages(OWNER, 2);
    expect(reminder.text).toBe('⏰ Stretch!');
    await new Promise((r) => setTimeout(r, 2000));
    expect(sentTo(OWNER)).toHaveLength(2);
  });
});
