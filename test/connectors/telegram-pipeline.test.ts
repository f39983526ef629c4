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

let api: FakeTelegram;
let fake: FakeLlm;
let db: TestDatabase;
let app: App;
let personasDir: string;

const user = { id: 7, is_bot: false, first_name: 'Ana' };
const dm = (updateId: number, text: string, edited = false) => ({
  update_id: updateId,
  [edited ? 'edited_message' : 'message']: { message_id: 500 + updateId, date: 0, chat: { id: 7, type: 'private' }, from: user, text },
});

async function until(check: () => boolean, timeoutMs = 8000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  api = await startFakeTelegram();
  fake = await startFakeLlm();
  db = await createTestDatabase();
  personasDir = await writePersonas({ tg: { connectors: { users: ['telegram:7'] } } });
  const settings = parseSettings({
    DATABASE_URL: db.url,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    TELEGRAM_BOT_TOKEN: '1:x',
    TELEGRAM_API_ROOT: api.apiRoot,
  });
  const log = pino({ level: 'silent' });
  app = await startApp({ settings, log, connectors: () => [createTelegramConnector({ token: '1:x', apiRoot: api.apiRoot, log, pollTimeoutSeconds: 0 })] });
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

  it('turns an edited message into a new turn marked (edited)', async () => {
    api.pushUpdates(dm(41, 'meet at 5', true));
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(fake.requests[0].lastUserText).toBe('(edited) meet at 5');
  });

  it('downloads a photo into the persona\'s workspace and tells the model where it is', async () => {
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
    expect(row.attachments).toEqual([{ type: 'photo', fileId: 'AgACAgQAAxkBAAIBcd', size: 15, path: 'uploads/photo-kBAAIBcd.jpg' }]);
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
    fake.script({ text: 'done thinking', delayMs: 300 });
    api.pushUpdates(dm(42, 'think a little'));
    await until(() => api.callsOf('sendMessage').length === 1);
    expect(api.callsOf('sendChatAction').length).toBeGreaterThan(0);
    expect(api.callsOf('sendChatAction')[0].body).toMatchObject({ chat_id: '7', action: 'typing' });
  });
});
