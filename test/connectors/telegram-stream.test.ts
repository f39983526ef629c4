// Streamed replies on Telegram ("stream": true): one message that grows as the model writes, edited within
// Telegram's limits, ending as the final answer, never sent a second time.
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { until } from '../support/until.ts';

let api: FakeTelegram;
let fake: FakeLlm;
let db: TestDatabase;
let app: App;
let nextUpdate = 1;

const ana = { id: 7, is_bot: false, first_name: 'Ana' };
const say = (text: string) =>
  api.pushUpdates({ update_id: nextUpdate++, message: { message_id: 100 + nextUpdate, date: 0, chat: { id: 7, type: 'private' }, from: ana, text } });
const sends = () => api.callsOf('sendMessage').filter((c) => String(c.body.chat_id) === '7');
const edits = () => api.callsOf('editMessageText').filter((c) => String(c.body.chat_id) === '7');
/** The text Telegram shows for a sent or edited message (the HTML's text). */
const plain = (html: string) => html.replace(/<[^>]+>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

beforeAll(async () => {
  api = await startFakeTelegram();
  fake = await startFakeLlm();
  db = await createTestDatabase();
  const personasDir = await writePersonas({ tg: { connectors: { users: ['telegram:7'] }, tools: { stream: true } } });
  const settings = parseSettings({ DATABASE_URL: db.url, LLM_BASE_URL: fake.openaiBaseUrl, LLM_MODEL: 'fake-model', PARLOR_PERSONAS_DIR: personasDir });
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  app = await startApp({
    settings,
    log,
    tools: createBuiltinTools({ timezone: 'UTC' }),
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
});

describe('a streamed reply on Telegram', () => {
  it('is one message, shown within a second of the first words, edited at most once a second, whose final text is the answer', async () => {
    const answer = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    fake.script({ text: answer, chunks: 40, chunkDelayMs: 50 });
    const asked = Date.now();
    say('tell me forty words');
    await until(() => sends().length === 1, 'the draft', 5_000);
    const firstShownAfter = Date.now() - asked;
    await app.waitForIdle('tg:telegram:7');
    expect(sends()).toHaveLength(1);
    expect(plain(String(edits().at(-1)!.body.text))).toBe(answer);
    // 40 chunks over 2 s (longer on a busy machine): at most one edit a second, and then the final one.
    expect(edits().length).toBeGreaterThanOrEqual(1);
    const writes = [sends()[0], ...edits()].map((c) => c.at!);
    const streamed = writes.slice(0, -1);
    for (let i = 1; i < streamed.length; i++) expect(streamed[i] - streamed[i - 1]).toBeGreaterThanOrEqual(950);
    expect(edits().length).toBeLessThanOrEqual(Math.ceil((writes.at(-1)! - writes[0]) / 1000) + 1);
    expect(firstShownAfter).toBeLessThan(3_000);
    await new Promise((r) => setTimeout(r, 1200));
    expect(sends()).toHaveLength(1);
  });

  it('the text before a tool call gives way to the answer in the same message', async () => {
    fake.script(
      { text: 'Let me check the clock.', toolCalls: [{ name: 'clock', arguments: {} }], chunks: 4, chunkDelayMs: 30 },
      { text: 'It is time for lunch.', chunks: 4, chunkDelayMs: 30 },
    );
    say('what time is it?');
    await until(() => sends().length === 1, 'the draft', 5_000);
    await app.waitForIdle('tg:telegram:7');
    expect(sends()).toHaveLength(1);
    expect(plain(String(edits().at(-1)!.body.text))).toBe('It is time for lunch.');
  });

  it('/stop mid-answer leaves the message finished, marked as stopped, and nothing after it', async () => {
    fake.script({ text: Array.from({ length: 40 }, (_, i) => `part${i}`).join(' '), chunks: 40, chunkDelayMs: 100 });
    say('a long story please');
    await until(() => sends().length === 1, 'the draft', 5_000);
    say('/stop');
    await until(() => edits().some((c) => /stopped/.test(String(c.body.text))), 'the stopped draft', 10_000);
    // The command's own answer goes through the outbox: out before the next test counts what was sent.
    await until(() => sends().some((c) => /^(Stopped|Nothing is running)/.test(String(c.body.text))), 'the answer to /stop', 10_000);
    await app.waitForIdle('tg:telegram:7');
    const last = plain(String(edits().at(-1)?.body.text ?? sends()[0].body.text));
    expect(last).toMatch(/— stopped$/);
    expect(last).not.toContain('part39');
  });

  it('an answer past 4,096 characters continues in a new message, nothing lost', async () => {
    const answer = `${'a'.repeat(3000)}\n\n${'b'.repeat(3000)}`;
    fake.script({ text: answer, chunks: 10, chunkDelayMs: 30 });
    say('a very long one');
    await until(() => sends().length === 2, 'the answer', 10_000);
    await app.waitForIdle('tg:telegram:7');
    const messages = sends();
    expect(messages).toHaveLength(2);
    const first = plain(String(edits().at(-1)!.body.text));
    expect(first).toBe('a'.repeat(3000));
    expect(plain(String(messages[1].body.text))).toBe('b'.repeat(3000));
  });

  it('a reasoning block never shows in the draft', async () => {
    fake.script({ text: '<think>the user wants the secret plan</think>Here is the plan.', chunks: 20, chunkDelayMs: 20 });
    say('plan?');
    await until(() => sends().length === 1, 'the draft', 5_000);
    await app.waitForIdle('tg:telegram:7');
    const shown = [...sends(), ...edits()].map((c) => plain(String(c.body.text)));
    expect(shown.every((t) => !t.includes('secret') && !t.includes('<think'))).toBe(true);
    expect(shown.at(-1)).toBe('Here is the plan.');
  });
});
