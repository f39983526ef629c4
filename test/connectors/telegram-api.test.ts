// The Telegram connector against a scripted Bot API: redelivery, formatting fallback, 429, typing, callbacks.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import type { Connector, InboundEvent, IngressResult } from '../../src/connector.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { until } from '../support/until.ts';

let api: FakeTelegram;
let connector: Connector;
const received: InboundEvent[] = [];
let answer: (event: InboundEvent) => IngressResult = () => ({ status: 'queued' });

beforeAll(async () => {
  api = await startFakeTelegram();
  connector = createTelegramConnector({ token: '1:x', apiRoot: api.apiRoot, log: pino({ level: 'silent' }), pollTimeoutSeconds: 0 });
  await connector.start(async (event) => {
    received.push(event);
    return answer(event);
  });
});
afterAll(async () => {
  await connector?.stop();
  await api?.close();
});
beforeEach(() => {
  received.length = 0;
  api.calls.length = 0;
  answer = () => ({ status: 'queued' });
});

const dm = (updateId: number, text: string) => ({
  update_id: updateId,
  message: { message_id: updateId, date: 0, chat: { id: 7, type: 'private' }, from: { id: 7, is_bot: false, first_name: 'Ana' }, text },
});


describe('receiving', () => {
  it('acknowledges an update (moves the offset past it) only after the core accepted it', async () => {
    let fail = true;
    answer = () => {
      if (fail) {
        fail = false;
        throw new Error('database down');
      }
      return { status: 'queued' };
    };
    api.pushUpdates(dm(10, 'first try fails'));
    api.pushUpdates(dm(10, 'first try fails')); // Telegram re-delivers what was not acknowledged
    await until(() => received.length === 2, 8000);
    const offsets = api.callsOf('getUpdates').map((c) => Number(c.body.offset ?? 0));
    expect(offsets.slice(0, 2)).toEqual([0, 0]);
    await until(() => api.callsOf('getUpdates').some((c) => Number(c.body.offset) === 11));
    expect(received.map((e) => e.externalId)).toEqual(['10', '10']);
  });

  it('answers every button press, with the core\'s notice', async () => {
    answer = (event) => ({ status: 'click', notice: event.data === 'q:x:1' ? 'This question was already answered.' : undefined });
    api.pushUpdates({
      update_id: 20,
      callback_query: { id: 'cb-1', from: { id: 7, is_bot: false, first_name: 'Ana' }, chat_instance: 'c', data: 'q:x:1', message: { message_id: 5, date: 0, chat: { id: 7, type: 'private' } } },
    });
    await until(() => api.callsOf('answerCallbackQuery').length === 1);
    expect(received[0]).toMatchObject({ kind: 'click', data: 'q:x:1', chat: { id: '7' } });
    expect(api.callsOf('answerCallbackQuery')[0].body).toMatchObject({ callback_query_id: 'cb-1', text: 'This question was already answered.' });
  });

  it('answers a button press that carries no message (an inline-mode message), and still hands it to the core', async () => {
    answer = () => ({ status: 'click', notice: 'Answer recorded: Yes' });
    api.pushUpdates({
      update_id: 21,
      callback_query: { id: 'cb-inline', from: { id: 7, is_bot: false, first_name: 'Ana' }, chat_instance: 'c', inline_message_id: 'AAAinline', data: 'q:y:1' },
    });
    await until(() => api.callsOf('answerCallbackQuery').length === 1);
    expect(api.callsOf('answerCallbackQuery')[0].body).toMatchObject({ callback_query_id: 'cb-inline', text: 'Answer recorded: Yes' });
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ kind: 'click', data: 'q:y:1', chat: { id: '7', type: 'dm' }, sender: { id: '7' } });
    expect(received[0].messageId).toBeUndefined();
  });

  it('skips an update it cannot read, instead of stopping every chat', async () => {
    api.queueUpdates({ update_id: 22, message: { message_id: 1, date: 0, chat: null, from: { id: 7, is_bot: false, first_name: 'Ana' }, text: 'broken' } } as never, dm(23, 'after the broken one'));
    await until(() => received.some((e) => e.text === 'after the broken one'));
    await until(() => api.unacknowledged().length === 0);
  });
});

describe('sending', () => {
  it('falls back to plain text, without tags, when Telegram cannot parse the entities', async () => {
    api.failNext('sendMessage', { ok: false, error_code: 400, description: "Bad Request: can't parse entities: unsupported start tag" });
    const sent = await connector.send({ chat: '7', text: 'Some **bold** text' });
    expect(sent.ids).toHaveLength(1);
    const [html, plain] = api.callsOf('sendMessage');
    expect(html.body.parse_mode).toBe('HTML');
    expect(plain.body.parse_mode).toBeUndefined();
    expect(plain.body.text).toBe('Some **bold** text');
    expect(plain.body.text).not.toMatch(/<\/?b>/);
  });

  it('sends a reply thousands of quote levels deep (too deep for the Markdown parser) as text, in order, nothing dropped', async () => {
    const paragraphs = Array.from({ length: 30 }, (_, i) => `Paragraph ${i} after the quote.`);
    const text = ['Before the quote.', `${'> '.repeat(5000)}deep inside`, ...paragraphs].join('\n\n');
    expect(text.length).toBeGreaterThan(10_000);
    const sent = await connector.send({ chat: '7', text });
    const parts = api.callsOf('sendMessage').map((c) => c.body.text as string);
    expect(sent.ids).toHaveLength(parts.length);
    expect(parts.every((p) => p.length > 0 && p.length <= 4096)).toBe(true);
    const words = parts.join('\n').replace(/<[^>]+>|&gt;|>/g, ' ');
    const order = ['Before the quote.', 'deep inside', ...paragraphs].map((w) => words.indexOf(w));
    expect(order.every((at) => at >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('waits out a 429 with its retry_after and sends once', async () => {
    api.failNext('sendMessage', { ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } });
    const started = Date.now();
    await connector.send({ chat: '7', text: 'hello' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(api.callsOf('sendMessage')).toHaveLength(2);
  });

  it('replies in the topic, to the triggering message, and shows typing', async () => {
    await connector.send({ chat: '-100', thread: '12', replyTo: '55', text: 'in the topic' });
    expect(api.callsOf('sendMessage')[0].body).toMatchObject({ chat_id: '-100', message_thread_id: 12, reply_parameters: { message_id: 55 } });
    await connector.typing!('-100', '12');
    expect(api.callsOf('sendChatAction')[0].body).toMatchObject({ chat_id: '-100', action: 'typing', message_thread_id: 12 });
  });

  it('reacts with an allowed emoji, and names the allowed ones otherwise', async () => {
    await connector.react!('7', '55', '❤️');
    expect(api.callsOf('setMessageReaction')[0].body).toMatchObject({ chat_id: '7', message_id: 55, reaction: [{ type: 'emoji', emoji: '❤' }] });
    await expect(connector.react!('7', '55', '🦖')).rejects.toThrow(/🦖 is not one of Telegram's reaction emoji; use one of 👍 👎/);
    expect(api.callsOf('setMessageReaction')).toHaveLength(1);
  });

  it('sends a file with the start of the text as its caption, and the rest of a long caption after it', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-tg-files-'));
    const report = path.join(dir, 'report.pdf');
    const chart = path.join(dir, 'chart.png');
    await fs.writeFile(report, 'pdf bytes');
    await fs.writeFile(chart, 'png bytes');
    const text = Array.from({ length: 12 }, (_, i) => `Line ${i}: ${'detail '.repeat(20)}`).join('\n\n');
    expect(text.length).toBeGreaterThan(1024);
    const sent = await connector.send({ chat: '7', text, files: [report, chart] });
    const [document] = api.callsOf('sendDocument');
    expect(document.body.document).toMatchObject({ name: 'report.pdf', size: 9 });
    expect(document.body.caption.length).toBeLessThanOrEqual(1024);
    expect(document.body.caption).toMatch(/^Line 0:/);
    expect(api.callsOf('sendPhoto')[0].body.caption).toBeUndefined();
    const rest = api.callsOf('sendMessage').map((c) => c.body.text).join('\n\n');
    expect(`${document.body.caption}\n\n${rest}`.match(/Line \d+/g)).toEqual(Array.from({ length: 12 }, (_, i) => `Line ${i}`));
    expect(sent.ids).toHaveLength(3);
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('a failure after part of a long reply went out is final, so no part is sent twice', async () => {
    const long = Array.from({ length: 3 }, (_, i) => `${i}`.repeat(3000)).join('\n\n');
    api.failNext('sendMessage', { ok: true, result: { message_id: 1, date: 0, chat: { id: 7, type: 'private' } } });
    api.failNext('sendMessage', { ok: false, error_code: 400, description: 'Bad Request: chat not found' });
    await expect(connector.send({ chat: '7', text: long })).rejects.toMatchObject({ name: 'PlatformError', retryable: false, status: 400 });
  });
});

describe('a second poller on the same token', () => {
  it('explains the 409 Conflict once and backs off instead of looping', async () => {
    const other = await startFakeTelegram();
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    other.failNext('getUpdates', { ok: false, error_code: 409, description: 'Conflict: terminated by other getUpdates request' }, 5);
    const second = createTelegramConnector({ token: '1:x', apiRoot: other.apiRoot, log, pollTimeoutSeconds: 0 });
    await second.start(async () => ({ status: 'queued' }));
    await new Promise((r) => setTimeout(r, 1000));
    await second.stop();
    await other.close();
    expect(other.callsOf('getUpdates')).toHaveLength(1);
    expect(lines.join('\n')).toMatch(/another process is receiving updates for this bot token \(409 Conflict\)/);
  });
});
