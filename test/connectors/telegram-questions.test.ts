// Buttons end to end on the Telegram emulator: tool approvals for shell_exec and ask_user questions, resolved by
// clicks (and typed replies), across restarts. A proxy in front of the emulator records the click acknowledgements.
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { TelegramServer } from 'telegram-test-api/lib/telegramServer.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { freePort } from '../support/net.ts';
import { startTelegramProxy, type TelegramProxy } from '../support/telegram-proxy.ts';
import { until } from '../support/until.ts';

const TOKEN = '123456:TEST-token';
const OWNER = 1001; // a user and the approver
const HELPER = 1002; // a user, not an approver

let server: TelegramServer;
let proxy: TelegramProxy;
let fake: FakeLlm;
let db: TestDatabase;
let app: App;
let personasDir: string;
let workspace: string;

interface BotMessage {
  messageId: number;
  message: { chat_id: number | string; text: string; reply_markup?: { inline_keyboard: { text: string; callback_data: string }[][] } };
}

async function start(): Promise<App> {
  const settings = parseSettings({
    DATABASE_URL: db.url,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: proxy.apiRoot,
  });
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  return startApp({
    settings,
    log,
    questionSweepMs: 200,
    connectors: () => [createTelegramConnector({ token: TOKEN, apiRoot: proxy.apiRoot, log, pollTimeoutSeconds: 0 })],
  });
}

function botMessages(chat = OWNER): BotMessage[] {
  return (server.storage.botMessages as unknown as BotMessage[]).filter((m) => Number(m.message.chat_id) === chat);
}

async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; bot said ${JSON.stringify(botMessages().map((m) => m.message.text))}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The newest bot message that carries buttons, as it was then (the emulator edits its record in place). */
async function waitForQuestion(chat = OWNER): Promise<BotMessage> {
  const found = await waitFor('a question with buttons', () => botMessages(chat).findLast((m) => (m.message.reply_markup?.inline_keyboard?.[0]?.length ?? 0) > 0));
  return structuredClone({ messageId: found.messageId, message: found.message });
}

function waitForText(pattern: RegExp, chat = OWNER): Promise<BotMessage> {
  return waitFor(`a message matching ${pattern}`, () => botMessages(chat).find((m) => pattern.test(m.message.text)));
}

function client(userId: number, chatId = OWNER) {
  return server.getClient(TOKEN, { userId, chatId, type: 'private', firstName: userId === OWNER ? 'Ana' : 'Bo', userName: userId === OWNER ? 'ana' : 'bo' });
}

async function say(text: string, userId = OWNER) {
  const c = client(userId);
  await c.sendMessage(c.makeMessage(text));
}

function sendClick(question: BotMessage, label: string, userId = OWNER) {
  const button = question.message.reply_markup!.inline_keyboard.flat().find((b) => b.text === label);
  if (!button) throw new Error(`no button "${label}"`);
  const c = client(userId);
  return c.sendCallback(c.makeCallbackQuery(button.callback_data, { message: { message_id: question.messageId } }));
}

/** Clicks a button of a bot message; resolves with the acknowledgement the bot gave (and how long it took). */
async function click(question: BotMessage, label: string, userId = OWNER): Promise<{ text?: string; ms: number }> {
  const before = proxy.callsOf('answerCallbackQuery').length;
  const sent = Date.now();
  await sendClick(question, label, userId);
  const ack = await waitFor('the click acknowledgement', () => proxy.callsOf('answerCallbackQuery')[before]);
  return { text: ack.body.text, ms: ack.at - sent };
}

function toolResult(req: RecordedRequest): string {
  const messages = req.body.messages as { role: string; content: string }[];
  return messages.findLast((m) => m.role === 'tool')?.content ?? '(no tool result)';
}

/** The model runs `command` through shell_exec, then reports what the tool returned. */
function scriptShell(command: string) {
  fake.script({ toolCalls: [{ name: 'shell_exec', arguments: { command } }] }, (req) => ({ text: `result: ${toolResult(req)}` }));
}

const rows = <T>(statement: ReturnType<typeof sql>) => app.database.db.execute(statement) as unknown as Promise<T[]>;

beforeAll(async () => {
  server = new TelegramServer({ port: await freePort(), host: '127.0.0.1', storeTimeout: 60 });
  await server.start();
  proxy = await startTelegramProxy(server.config.apiURL);
  fake = await startFakeLlm();
  db = await createTestDatabase();
  personasDir = await writePersonas({
    ops: {
      soul: 'You run commands for Ana.',
      connectors: {
        users: [`telegram:${OWNER}`, `telegram:${HELPER}`],
        approvers: [`telegram:${OWNER}`],
        primary: { connector: 'telegram', to: String(OWNER) },
      },
      tools: { approve: ['shell_exec'], approvalTimeoutSeconds: 3 },
    },
  });
  workspace = path.join(personasDir, 'ops', 'workspace');
  fs.mkdirSync(workspace, { recursive: true });
  app = await start();
});

afterAll(async () => {
  await app?.stop();
  await proxy?.close();
  await server?.stop();
  await fake?.close();
  await db?.drop();
  fs.rmSync(personasDir, { recursive: true, force: true });
});

beforeEach(() => {
  fake.reset();
  server.storage.botMessages.length = 0;
  for (const f of fs.readdirSync(workspace)) fs.rmSync(path.join(workspace, f), { recursive: true, force: true });
});

describe('tool approvals on Telegram', () => {
  it('Allow once: the command runs, its output reaches the model, and the final reply arrives', async () => {
    scriptShell('echo hello-from-shell');
    await say('say hello from the shell');
    const question = await waitForQuestion();
    expect(question.message.text).toContain('shell_exec');
    expect(question.message.text).toContain('echo hello-from-shell');
    expect(question.message.reply_markup!.inline_keyboard.flat().map((b) => b.text)).toEqual(['Allow once', 'Always allow', 'Deny']);
    for (const b of question.message.reply_markup!.inline_keyboard.flat()) expect(Buffer.byteLength(b.callback_data)).toBeLessThanOrEqual(64);

    const ack = await click(question, 'Allow once');
    expect(ack.ms).toBeLessThan(3000);
    await waitForText(/^result: exit=0\nhello-from-shell$/);
    const closed = botMessages().find((m) => m.messageId === question.messageId)!;
    expect(closed.message.text).toMatch(/Allowed once by @ana/);
    expect(closed.message.reply_markup?.inline_keyboard ?? []).toEqual([]);

    const [row] = await rows<{ status: string; answered_by: string; answered_at: Date | null; answer: { choice: string } }>(
      sql`select status, answered_by, answered_at, answer from questions where kind = 'approval' order by created_at desc limit 1`,
    );
    expect(row).toMatchObject({ status: 'answered', answered_by: '@ana', answer: { choice: 'once' } });
    expect(row.answered_at).not.toBeNull();
  });

  it('Deny: the tool does not run and the model is told it was denied', async () => {
    scriptShell('touch denied.txt');
    await say('make a file');
    const question = await waitForQuestion();
    await click(question, 'Deny');
    const reply = await waitForText(/^result: /);
    expect(reply.message.text).toMatch(/denied: shell_exec did not run \(denied by @ana\)/);
    expect(fs.existsSync(path.join(workspace, 'denied.txt'))).toBe(false);
    expect(botMessages().find((m) => m.messageId === question.messageId)!.message.text).toMatch(/Denied by @ana/);
  });

  it('timeout: nobody answers, the tool does not run, and the message says it expired', async () => {
    scriptShell('touch late.txt');
    await say('make a late file');
    const question = await waitForQuestion();
    const reply = await waitForText(/^result: /, OWNER);
    expect(reply.message.text).toMatch(/denied: shell_exec did not run \(nobody approved it in time\)/);
    expect(fs.existsSync(path.join(workspace, 'late.txt'))).toBe(false);
    // The turn goes on once the question has expired; its message is edited by whichever expired it (the turn's own
    // timer, or the sweep when it came first, as under load), so the edit may land just after the reply.
    const closedNow = () => botMessages().find((m) => m.messageId === question.messageId)!;
    await until(() => /Expired/.test(closedNow().message.text ?? ''), 'the question message edited', 5000);
    const closed = closedNow();
    expect(closed.message.text).toMatch(/Expired: no answer in time — shell_exec did not run/);
    expect(closed.message.reply_markup?.inline_keyboard ?? []).toEqual([]);
    // A click after the end changes nothing.
    expect((await click(question, 'Allow once')).text).toBe('This question has expired.');
    expect(fs.existsSync(path.join(workspace, 'late.txt'))).toBe(false);
  });

  it('Always allow: the same command later runs without a question, also after a restart; another command still asks', async () => {
    scriptShell('echo always-ok');
    await say('run the usual');
    await click(await waitForQuestion(), 'Always allow');
    await waitForText(/^result: exit=0\nalways-ok$/);
    const grants = await rows<{ tool: string; scope: string; granted_by: string }>(sql`select tool, scope, granted_by from tool_grants where persona = 'ops'`);
    expect(grants).toContainEqual({ tool: 'shell_exec', scope: 'call:echo always-ok', granted_by: '@ana' });

    await app.stop();
    app = await start();
    server.storage.botMessages.length = 0;
    scriptShell('echo always-ok');
    await say('run the usual again');
    await waitForText(/^result: exit=0\nalways-ok$/);
    expect(botMessages().filter((m) => m.message.reply_markup?.inline_keyboard?.length)).toHaveLength(0);

    scriptShell('echo something-else');
    await say('run something else');
    await click(await waitForQuestion(), 'Deny');
    await waitForText(/denied by @ana/);
  });

  it("a non-approver's click gets a private notice and changes nothing", async () => {
    scriptShell('touch by-helper.txt');
    await say('make a file');
    const question = await waitForQuestion();
    const ack = await click(question, 'Allow once', HELPER);
    expect(ack.text).toBe('This is not yours to approve.');
    const [row] = await rows<{ status: string }>(sql`select status from questions where kind = 'approval' order by created_at desc limit 1`);
    expect(row.status).toBe('pending');
    expect(botMessages().find((m) => m.messageId === question.messageId)!.message.reply_markup!.inline_keyboard.flat()).toHaveLength(3);
    expect(fs.existsSync(path.join(workspace, 'by-helper.txt'))).toBe(false);
    await click(question, 'Deny');
    await waitForText(/^result: /);
  });

  it('a double click has one effect', async () => {
    scriptShell('echo tick >> ticks.txt');
    await say('tick once');
    const question = await waitForQuestion();
    const before = proxy.callsOf('answerCallbackQuery').length;
    await Promise.all([sendClick(question, 'Allow once'), sendClick(question, 'Allow once')]);
    const acks = await waitFor('two acknowledgements', () => proxy.callsOf('answerCallbackQuery').length >= before + 2 && proxy.callsOf('answerCallbackQuery').slice(before));
    await waitForText(/^result: exit=0/);
    expect(fs.readFileSync(path.join(workspace, 'ticks.txt'), 'utf8')).toBe('tick\n');
    expect(acks.map((a) => a.body.text).sort()).toEqual(['Allow once: noted.', 'Already answered by @ana.']);
  });

  it('a restart while an approval is pending expires it, updates the message, and the turn carries on', async () => {
    fake.script({ toolCalls: [{ name: 'shell_exec', arguments: { command: 'touch restarted.txt' } }] });
    await say('touch it');
    const question = await waitForQuestion();
    await app.stop();
    const closed = botMessages().find((m) => m.messageId === question.messageId)!;
    expect(closed.message.text).toMatch(/Expired: Parlor restarted while it waited — shell_exec did not run/);
    expect(closed.message.reply_markup?.inline_keyboard ?? []).toEqual([]);

    fake.script((req) => ({ text: `after restart: ${toolResult(req)}` }));
    app = await start();
    const reply = await waitForText(/^after restart: /);
    expect(reply.message.text).toMatch(/did not run/);
    expect((await click(question, 'Allow once')).text).toBe('This question has expired.');
    expect(fs.existsSync(path.join(workspace, 'restarted.txt'))).toBe(false);
  });

  it('after a crash, a question whose waiting process is gone is expired and its message updated', async () => {
    const telegram = app.connectors.get('telegram')!;
    const id = 'crashed-question-1';
    const sent = await telegram.send({ chat: String(OWNER), text: 'Run x?', buttons: [[{ label: 'Allow once', data: `q:${id}:once` }]] });
    await app.database.db.execute(sql`
      insert into outbound_messages (dedupe_key, connector, chat, text, status, platform_message_ids)
      values (${`question:${id}`}, 'telegram', ${String(OWNER)}, 'Run x?', 'sent', ${JSON.stringify(sent.ids)}::jsonb)`);
    await app.database.db.execute(sql`
      insert into questions (id, kind, persona, conversation_id, method, data, text, choices, connector, chat, approvers_only, owner, expires_at)
      values (${id}, 'approval', 'ops', 'ops:crashed', 'approve', '{"tool":"shell_exec","scope":"x"}'::jsonb, 'Run x?',
        '[{"id":"once","label":"Allow once"}]'::jsonb, 'telegram', ${String(OWNER)}, true, 'parlor:0:gone', now() + interval '1 hour')`);
    await app.questions.sweep();
    const closed = await waitFor('the edit', () => botMessages().find((m) => /restarted while it waited/.test(m.message.text)));
    expect(closed.messageId).toBe(Number(sent.ids[0]));
  });
});

describe('ask_user on Telegram', () => {
  function scriptAsk(question: string, choices?: string[]) {
    fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question, ...(choices ? { choices } : {}) } }] }, (req) => ({ text: `got: ${req.lastUserText}` }));
  }

  it('a click answers it and wakes the conversation with the framed answer', async () => {
    scriptAsk('Deploy now?', ['Yes', 'Later']);
    await say('should we deploy?');
    const question = await waitForQuestion();
    expect(question.message.text).toBe('❓ Deploy now?');
    await click(question, 'Later');
    const reply = await waitForText(/^got: /);
    const [row] = await rows<{ id: string }>(sql`select id from questions where kind = 'ask' order by created_at desc limit 1`);
    expect(reply.message.text).toBe(`got: [answer to Q#${row.id.slice(0, 6)} "Deploy now?" (button click on telegram:${OWNER} by @ana)]\nLater`);
    // The question's own message shows the answer too; that edit and the woken turn's reply go out independently.
    await waitFor('the question edited', () => botMessages().find((m) => m.messageId === question.messageId && /Later \(answered by @ana\)/.test(m.message.text)));
    // The asking turn ended with the question: one model call before the answer, one after.
    expect(fake.requests).toHaveLength(2);
  });

  it('a typed reply in the chat is absorbed as the answer instead of starting an ordinary turn', async () => {
    scriptAsk('Which day?');
    await say('plan the trip');
    const question = await waitForQuestion();
    await say('tomorrow please');
    const reply = await waitForText(/^got: /);
    const typed = server.storage.userMessages.findLast((u) => (u as { message?: { text?: string } }).message?.text === 'tomorrow please') as { messageId: number };
    expect(reply.message.text).toMatch(new RegExp(`\\(via telegram:${OWNER}:${typed.messageId} by @ana\\)\\]\\ntomorrow please$`));
    expect(fake.requests).toHaveLength(2);
    await waitFor('the question closed', () => /tomorrow please \(answered by @ana\)/.test(botMessages().find((m) => m.messageId === question.messageId)!.message.text));
  });

  it('an answer after a restart still wakes the asking conversation', async () => {
    scriptAsk('Ready?');
    await say('ask me something');
    const question = await waitForQuestion();
    await waitFor('the asking turn to end', async () => (await rows<{ n: number }>(sql`select count(*)::int as n from turns where status = 'running'`))[0].n === 0);
    await app.stop();
    app = await start();
    fake.reset();
    fake.script((req) => ({ text: `after restart got: ${req.lastUserText}` }));
    await click(question, 'Yes');
    const reply = await waitForText(/^after restart got: /);
    expect(reply.message.text).toMatch(/"Ready\?" \(button click on telegram:1001 by @ana\)\]\nYes$/);
  });

  it('a click on an expired question gets a polite notice and wakes nothing', async () => {
    scriptAsk('Still there?');
    await say('check on me');
    const question = await waitForQuestion();
    await app.database.db.execute(sql`update questions set expires_at = now() - interval '1 second' where kind = 'ask' and status = 'pending'`);
    const requestsBefore = fake.requests.length;
    expect((await click(question, 'Yes')).text).toBe('This question has expired.');
    await app.questions.sweep();
    await waitFor('the expiry shown', () => /Expired/.test(botMessages().find((m) => m.messageId === question.messageId)!.message.text));
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.requests.length).toBe(requestsBefore);
  });
});
