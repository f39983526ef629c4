// Telegram updates through the whole pipeline, driven by a scripted Bot API (for what the emulator cannot do).
import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { until } from '../support/until.ts';
import { curePoison, poisonMessages } from '../support/poison.ts';

let api: FakeTelegram;
let fake: FakeLlm;
let db: TestDatabase;
let app: App;
let personasDir: string;

const user = { id: 7, is_bot: false, first_name: 'Ana' };
const ben = { id: 8, is_bot: false, first_name: 'Ben' };
const dm = (updateId: number, text: string, edited = false) => ({
  update_id: updateId,
  [edited ? 'edited_message' : 'message']: { message_id: 500 + updateId, date: 0, chat: { id: 7, type: 'private' }, from: user, text },
});
const benSays = (updateId: number, text: string) => ({
  update_id: updateId,
  message: { message_id: 500 + updateId, date: 0, chat: { id: 8, type: 'private' }, from: ben, text },
});
const documentFrom = (updateId: number, fileId: string, fileName: string, caption: string) => ({
  update_id: updateId,
  message: {
    message_id: 500 + updateId,
    date: 0,
    chat: { id: 7, type: 'private' },
    from: user,
    caption,
    document: { file_id: fileId, file_unique_id: `u${updateId}`, file_name: fileName, mime_type: 'application/pdf', file_size: 15 },
  },
});
const sentTo = (chat: string) => api.callsOf('sendMessage').filter((c) => String(c.body.chat_id) === chat);
/** Error lines the app logged. */
const errors: string[] = [];


beforeAll(async () => {
  api = await startFakeTelegram();
  fake = await startFakeLlm();
  db = await createTestDatabase();
  personasDir = await writePersonas({ tg: { connectors: { users: ['telegram:7', 'telegram:8'] } } });
  const settings = parseSettings({
    DATABASE_URL: db.url,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    TELEGRAM_BOT_TOKEN: '1:x',
    TELEGRAM_API_ROOT: api.apiRoot,
  });
  const log = pino({ level: 'error' }, { write: (line: string) => void errors.push(line) });
  app = await startApp({
    settings,
    log,
    // Longer than the default, so that a turn slowed by a busy machine still answers "at once".
    typingAfterMs: 1000,
    connectors: () => [createTelegramConnector({ token: '1:x', apiRoot: api.apiRoot, log, pollTimeoutSeconds: 0 })],
  });
});
afterAll(async () => {
  await app?.stop();
  await api?.close();
  await fake?.close();
  await db?.drop();
});
beforeEach(() => {
  fake.reset();
  api.calls.length = 0;
  errors.length = 0;
});

describe('Telegram through the pipeline', () => {
  it('answers an update delivered twice (a redelivery after a crash) once', async () => {
    api.pushUpdates(dm(40, 'only once please'));
    api.pushUpdates(dm(40, 'only once please'));
    await until(() => api.callsOf('sendMessage').length === 1);
    await app.waitForIdle('tg:telegram:7');
    await new Promise((r) => setTimeout(r, 300));
    expect(api.callsOf('sendMessage').map((c) => c.body.text)).toEqual(['echo: only once please']);
    expect(fake.requests).toHaveLength(1);
  });

  it("a burst of commands in one chat never holds another chat's message: the update loop does not wait on a chat's rate limit", async () => {
    // Fifteen /help from Ben: past the burst, Telegram's pace is about one message a second in his chat.
    api.pushUpdates(...Array.from({ length: 15 }, (_, i) => benSays(900 + i, '/help')));
    api.pushUpdates(dm(915, 'are you there?'));
    const started = Date.now();
    await until(() => sentTo('7').length === 1, 20_000);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(sentTo('7')[0].body.text).toBe('echo: are you there?');
    // Ben still gets every answer, in order.
    await until(() => sentTo('8').length === 15, 30_000);
    expect(new Set(sentTo('8').map((c) => c.body.text.split('\n')[0]))).toEqual(new Set(['Commands:']));
    await app.waitForIdle('tg:telegram:7');
  }, 40_000);

  it('turns an edited message into a new turn marked (edited)', async () => {
    api.pushUpdates(dm(41, 'meet at 5', true));
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(fake.requests[0].lastUserText).toBe('(edited) meet at 5');
  });

  it('downloads a photo into the persona\'s workspace and tells the model where it is, even when the download is slower than the turn', async () => {
    api.serveFile('AgACAgQAAxkBAAIBcd', { until: new Promise((r) => setTimeout(r, 700)) });
    api.pushUpdates({
      update_id: 43,
      message: {
        message_id: 543,
        date: 0,
        chat: { id: 7, type: 'private' },
        from: user,
        caption: 'what is this?',
        photo: [{ file_id: 'AgACAgQAAxkBAAIBcd', file_unique_id: 'x', width: 90, height: 90, file_size: 15 }],
      },
    });
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(fake.requests[0].lastUserText).toMatch(/^what is this\?\n\[attachment: photo \(15 bytes, saved at uploads\/photo-kBAAIBcd\.jpg\)\]$/);
    const saved = path.join(personasDir, 'tg', 'workspace', 'uploads', 'photo-kBAAIBcd.jpg');
    expect(await fs.readFile(saved, 'utf8')).toBe('fake file bytes');
    const [row] = (await app.database.db.execute(
      sql`select content->'attachments' as attachments from messages where content->>'content' like 'what is this?%'`,
    )) as unknown as { attachments: unknown[] }[];
    expect(row.attachments).toEqual([{ type: 'photo', fileId: 'AgACAgQAAxkBAAIBcd', size: 15, downloadId: expect.any(String), path: 'uploads/photo-kBAAIBcd.jpg' }]);
  });

  it('downloads the file of an update delivered twice once', async () => {
    const update = documentFrom(49, 'BQACAgQAAxkBAAIBdup1', 'twice.pdf', 'only one copy');
    api.pushUpdates(update);
    api.pushUpdates(update);
    await until(() => api.callsOf('sendMessage').length === 1);
    await app.waitForIdle('tg:telegram:7');
    await new Promise((r) => setTimeout(r, 300));
    expect(api.callsOf('getFile')).toHaveLength(1);
    expect(api.callsOf('file')).toHaveLength(1);
  });

  it('does not hold up another chat\'s message while a large file downloads slowly', async () => {
    let release!: () => void;
    api.serveFile('BQACAgQAAxkBAAIBslow', { until: new Promise<void>((r) => (release = r)) });
    try {
      api.pushUpdates(documentFrom(50, 'BQACAgQAAxkBAAIBslow', 'huge.pdf', 'a big one'), benSays(51, 'not stuck behind the file'));
      await until(() => sentTo('8').length === 1, 4000);
      expect(sentTo('8')[0].body.text).toBe('echo: not stuck behind the file');
    } finally {
      release();
    }
    await until(() => sentTo('7').length === 1);
    expect(sentTo('7')[0].body.text).toMatch(/^echo: a big one\n\[attachment: document \(huge\.pdf, application\/pdf, 15 bytes, saved at uploads\/huge-AAIBslow\.pdf\)\]$/);
    await app.waitForIdle('tg:telegram:7');
  });

  it('lets the persona react to the message it is answering', async () => {
    fake.script({ toolCalls: [{ name: 'react', arguments: { emoji: '👍' } }] }, { text: 'noted' });
    api.pushUpdates(dm(44, 'I sent the report'));
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(api.callsOf('setMessageReaction')[0].body).toMatchObject({ chat_id: '7', message_id: 544, reaction: [{ type: 'emoji', emoji: '👍' }] });
    expect(fake.requests[1].body.messages.at(-1).content).toBe('reacted with 👍');
    // A DM answer does not quote the message.
    expect(api.callsOf('sendMessage')[0].body.reply_parameters).toBeUndefined();
  });

  it('records a reaction to one of its messages for the next turn, without starting one', async () => {
    api.pushUpdates(dm(45, 'here is my plan'));
    await until(() => api.callsOf('sendMessage').length === 1);
    await app.waitForIdle('tg:telegram:7');
    const [sent] = (await app.database.db.execute(
      sql`select platform_message_ids->>0 as id from outbound_messages where text = 'echo: here is my plan'`,
    )) as unknown as { id: string }[];
    const botMessageId = Number(sent.id);
    const reaction = (id: number, messageId: number, emoji: string) => ({
      update_id: id,
      message_reaction: { chat: { id: 7, type: 'private' }, message_id: messageId, user, date: 0, old_reaction: [], new_reaction: [{ type: 'emoji', emoji }] },
    });
    api.pushUpdates(reaction(46, botMessageId, '🔥'), reaction(47, 99_999, '👎'));
    await new Promise((r) => setTimeout(r, 600));
    expect(fake.requests).toHaveLength(1); // no turn for a reaction
    api.pushUpdates(dm(48, 'so?'));
    await until(() => api.callsOf('sendMessage').length === 2);
    const contents = fake.requests[1].body.messages.map((m: { content: string }) => m.content);
    expect(contents).toContain('[Ana reacted 🔥 to your message "echo: here is my plan"]');
    expect(contents.join('\n')).not.toContain('👎');
  });

  it('shows typing while the turn runs', async () => {
    fake.script({ text: 'done thinking', delayMs: 1500 });
    api.pushUpdates(dm(42, 'think a little'));
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(api.callsOf('sendChatAction').length).toBeGreaterThan(0);
    expect(api.callsOf('sendChatAction')[0].body).toMatchObject({ chat_id: '7', action: 'typing' });
  });

  it('an answer that comes at once is sent without "typing…" before it', async () => {
    // In a chat of its own: chat 7's replies are paced to Telegram's one message a second per chat.
    fake.script({ text: 'at once' });
    api.pushUpdates(benSays(950, 'quick one'));
    await until(() => sentTo('8').length === 1);
    await new Promise((r) => setTimeout(r, 400));
    expect(sentTo('8')[0].body.text).toBe('at once');
    expect(api.callsOf('sendChatAction').filter((c) => String(c.body.chat_id) === '8')).toEqual([]);
  });
});

describe('updates that cannot be stored', () => {
  afterAll(async () => {
    await curePoison(app.database.db);
  });

  it('a NUL in the text or a file name is stored without it, and the message is answered', async () => {
    api.pushUpdates(dm(70, 'nul\u0000 in the text'));
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(api.callsOf('sendMessage')[0].body.text).toBe('echo: nul in the text');
    await app.waitForIdle('tg:telegram:7');

    api.pushUpdates(documentFrom(71, 'BQACAgQAAxkBAAIBnul1', 're\u0000port.pdf', 'see\u0000 attached'));
    await until(() => api.callsOf('sendMessage').length === 2);
    expect(api.callsOf('sendMessage')[1].body.text).toMatch(/^echo: see attached\n\[attachment: document \(report\.pdf, application\/pdf, 15 bytes, /);
    const [row] = (await app.database.db.execute(
      sql`select content->'attachments'->0->>'name' as name from messages where content->>'content' like 'see attached%'`,
    )) as unknown as { name: string }[];
    expect(row.name).toBe('report.pdf');
    await app.waitForIdle('tg:telegram:7');
  });

  it('an update that fails to store is dead-lettered after 3 attempts, and messages from other chats sent after it are still answered', async () => {
    await poisonMessages(app.database.db);
    api.queueUpdates(dm(80, 'a poison pill'), benSays(81, 'hello from another chat'));
    await until(() => sentTo('8').length === 1, 15_000);
    expect(sentTo('8')[0].body.text).toBe('echo: hello from another chat');
    expect(sentTo('7')).toHaveLength(0);

    const [failure] = (await app.database.db.execute(
      sql`select attempts, dead_lettered, last_error, raw from inbound_failures where connector = 'telegram' and external_id = '80'`,
    )) as unknown as { attempts: number; dead_lettered: boolean; last_error: string; raw: string }[];
    expect(failure).toMatchObject({ attempts: 3, dead_lettered: true });
    expect(failure.last_error).toContain('poisoned message');
    expect(JSON.parse(failure.raw)).toMatchObject({ connector: 'telegram', externalId: '80', text: 'a poison pill' });
    const deadLetter = errors.map((line) => JSON.parse(line)).find((entry) => /dead-lettered/.test(entry.msg));
    expect(deadLetter).toMatchObject({ event: '80', connector: 'telegram', err: { message: expect.stringContaining('poisoned message') } });
    // Acknowledged: Telegram is no longer asked for it.
    await until(() => api.unacknowledged().length === 0);
    await app.waitForIdle('tg:telegram:8');
  });
});
