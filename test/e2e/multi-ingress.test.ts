// Telegram webhooks and Slack HTTP events behind several ingress processes: two real `parlor start --role ingress`
// and one `--role worker` on one database, the test acting as the load balancer. An update or event that reaches
// both ingress processes (a retry landing on the other instance, or both copies at once) is answered once; many
// chats at once keep each chat's order; a click on the other ingress resolves its question once; a request without
// the secret or a good signature is refused by each. Every reply is sent once in all.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSecret } from '../../connectors/telegram/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm, type FakeReply, type RecordedRequest } from '../support/fake-llm.ts';
import { interactionForm, signedRequest, startFakeSlack, type FakeSlack } from '../support/fake-slack.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { freePort } from '../support/net.ts';
import { killAll, startParlorProcess, TELEGRAM_TOKEN, type ParlorProcessOptions } from '../support/parlor-process.ts';
import { until } from '../support/until.ts';

/** The Telegram approver; CHATS are more people, each in a DM of their own. */
const OWNER = 1001;
const CHATS = [2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008];
/** A chat whose first reply Telegram holds back with a 429. */
const LIMITED = 3001;
const MESSAGES_PER_CHAT = 4;
const SLACK_OWNER = 'U0OWNER';
const SLACK_DM = 'D0OWNER';
const SIGNING_SECRET = 'mi-slack-signing-secret';
const SECRET = webhookSecret(TELEGRAM_TOKEN);
/** How long to wait, after the reply, for a second copy that must not come. */
const SETTLE_MS = 500;

interface Ingress {
  name: string;
  base: string;
  process: ResultPromise;
}

let db: TestDatabase;
let fake: FakeLlm;
let telegram: FakeTelegram;
let slack: FakeSlack;
let personasDir: string;
let home: string;
let a: Ingress;
let b: Ingress;
const children: ResultPromise[] = [];

const textOf = (content: unknown): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? '').join('\n') : '';

/**
 * The model: a tool call for "please write X" (file_write, which needs approval) and "please ask X" (ask_user), the
 * tool's result once it is back, the answer to a question; otherwise it echoes, in order, what the person wrote that
 * no earlier echo in the request answered (messages that arrived together are answered together).
 */
function model(req: RecordedRequest): FakeReply {
  const messages = req.body.messages as { role: string; content: unknown }[];
  const last = messages.at(-1)!;
  if (last.role === 'tool') return { text: `done: ${textOf(last.content)}` };
  const text = req.lastUserText;
  const write = /^please write (\w+)$/.exec(text)?.[1];
  if (write) return { toolCalls: [{ name: 'file_write', arguments: { path: `${write}.txt`, content: 'written' } }] };
  const ask = /^please ask (\w+)$/.exec(text)?.[1];
  if (ask) return { toolCalls: [{ name: 'ask_user', arguments: { question: `${ask}: tea or coffee?`, choices: ['Tea', 'Coffee'] } }] };
  if (text.startsWith('[answer to Q#')) return { text: `got: ${text.split('\n').at(-1)}` };
  const echoed = new Set(messages.filter((m) => m.role === 'assistant').flatMap((m) => echoedTexts(textOf(m.content))));
  const unanswered = messages
    .filter((m) => m.role === 'user')
    .map((m) => textOf(m.content))
    .filter((t) => !echoed.has(t) && !t.startsWith('please ') && !t.startsWith('[answer to'));
  return { text: `echo: ${unanswered.join(' | ')}` };
}

/** The messages an echo answered. */
const echoedTexts = (reply: string): string[] => (reply.startsWith('echo: ') ? reply.slice('echo: '.length).split(' | ') : []);

async function startIngress(name: string, options: Omit<ParlorProcessOptions, 'role' | 'httpPort'>): Promise<Ingress> {
  const port = await freePort();
  return { name, base: `http://127.0.0.1:${port}`, process: startParlorProcess({ ...options, role: 'ingress', httpPort: port }, children) };
}

/** Healthy: the HTTP server answers and both connectors are up. */
async function healthy(ingress: Ingress): Promise<boolean> {
  if (ingress.process.exitCode !== null) throw new Error(`ingress ${ingress.name} exited: ${(await ingress.process).stderr}`);
  try {
    return (await fetch(`${ingress.base}/healthz`, { signal: AbortSignal.timeout(1000) })).status === 200;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  [db, fake, telegram, slack] = await Promise.all([
    createTestDatabase(),
    startFakeLlm(),
    startFakeTelegram(),
    startFakeSlack({ users: { [SLACK_OWNER]: { name: 'ana', real_name: 'Ana' } } }),
  ]);
  fake.setDefault(model);
  home = await fs.mkdtemp(path.join(os.tmpdir(), 'mi-home-'));
  personasDir = await writePersonas({
    assistant: {
      connectors: {
        users: [`telegram:${OWNER}`, ...CHATS.map((c) => `telegram:${c}`), `telegram:${LIMITED}`, `slack:${SLACK_OWNER}`],
        approvers: [`telegram:${OWNER}`, `slack:${SLACK_OWNER}`],
        primary: { connector: 'telegram', to: String(OWNER) },
      },
      tools: { approve: ['file_write'] },
    },
  });
  await fs.mkdir(path.join(personasDir, 'assistant', 'workspace'));
  // The same settings for every process of the deployment.
  const options = {
    databaseUrl: db.url,
    personasDir,
    llmBaseUrl: fake.openaiBaseUrl,
    telegramApiRoot: telegram.apiRoot,
    home,
    env: {
      TELEGRAM_WEBHOOK_URL: 'https://parlor.example.com',
      SLACK_BOT_TOKEN: slack.botToken,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_API_URL: slack.apiUrl,
    },
  };
  a = await startIngress('A', options);
  b = await startIngress('B', options);
  startParlorProcess({ ...options, role: 'worker' }, children);
  await until(async () => (await healthy(a)) && (await healthy(b)), 'both ingress processes to be healthy', 45_000);
}, 60_000);

afterAll(async () => {
  await killAll(children);
  await Promise.all([telegram?.close(), slack?.close(), fake?.close()]);
  await db?.drop();
  if (personasDir) await fs.rm(personasDir, { recursive: true, force: true });
  if (home) await fs.rm(home, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- Telegram ----

let nextUpdate = 7000;
let nextMessage = 300;

const dmUpdate = (chat: number, text: string) => ({
  update_id: ++nextUpdate,
  message: {
    message_id: ++nextMessage,
    date: Math.floor(Date.now() / 1000),
    chat: { id: chat, type: 'private' },
    from: { id: chat, is_bot: false, first_name: `P${chat}` },
    text,
  },
});

/** `secret: null` sends none. */
const postUpdate = (ingress: Ingress, update: unknown, secret: string | null = SECRET) =>
  fetch(`${ingress.base}/telegram/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(secret !== null ? { 'x-telegram-bot-api-secret-token': secret } : {}) },
    body: JSON.stringify(update),
  }).then((r) => r.status);

/** What the bot sent to Telegram (successful calls only), in the order the Bot API received them. */
const telegramSent = () =>
  telegram
    .callsOf('sendMessage')
    .filter((c) => c.result !== undefined)
    .map((c) => ({
      chat: Number(c.body.chat_id),
      text: String(c.body.text),
      id: (c.result as { message_id: number }).message_id,
      buttons: (c.body.reply_markup?.inline_keyboard ?? []).flat() as { text: string; callback_data: string }[],
    }));
const telegramTexts = (chat: number) => telegramSent().filter((m) => m.chat === chat).map((m) => m.text);

// ---- Slack ----

let nextTs = 1_700_002_000;
const slackDmEvent = (text: string) => {
  const ts = `${nextTs++}.000200`;
  return { type: 'message', channel: SLACK_DM, channel_type: 'im', user: SLACK_OWNER, text, ts, event_ts: ts };
};
const target = (ingress: Ingress) => ({ url: `${ingress.base}/slack/events`, signingSecret: SIGNING_SECRET });
const postSlack = (ingress: Ingress, request: { body: string; headers: Record<string, string> }) =>
  fetch(`${ingress.base}/slack/events`, { method: 'POST', headers: request.headers, body: request.body }).then((r) => r.status);
/** What the bot posted to Slack (successful calls only), in order. */
const slackTexts = () =>
  slack
    .callsOf('chat.postMessage')
    .filter((c) => typeof c.response === 'object' && c.response.ok)
    .map((c) => String(c.body.text ?? ''));

async function inboundRows(connector: string, externalId: string): Promise<number> {
  const [row] = await db.database.sql<{ n: number }[]>`select count(*)::int as n from inbound_events where connector = ${connector} and external_id = ${externalId}`;
  return row.n;
}

/** How many times a person's message is in the transcript. */
async function stored(text: string): Promise<number> {
  const [row] = await db.database.sql<{ n: number }[]>`select count(*)::int as n from messages where role = 'user' and content->>'content' = ${text}`;
  return row.n;
}

const modelSaw = (text: string) => fake.requests.some((r) => JSON.stringify(r.body).includes(text));

/** What the echoes sent to a Telegram chat answered, in the order they were sent. */
const echoedIn = (chat: number, from = 0) =>
  telegramSent()
    .slice(from)
    .filter((m) => m.chat === chat)
    .flatMap((m) => echoedTexts(m.text));

describe('Telegram webhooks behind two ingress processes', () => {
  it('an update retried on the other ingress, or posted to both at once, is answered once', async () => {
    const retried = dmUpdate(OWNER, 'hello, retried on B');
    expect(await postUpdate(a, retried)).toBe(200);
    // Telegram did not hear the 200 (a timeout at the balancer) and delivers it again: the other instance gets it.
    expect(await postUpdate(b, retried)).toBe(200);
    const both = dmUpdate(OWNER, 'hello, to both at once');
    expect(await Promise.all([postUpdate(a, both), postUpdate(b, both), postUpdate(a, both), postUpdate(b, both)])).toEqual([200, 200, 200, 200]);
    const expected = ['hello, retried on B', 'hello, to both at once'];
    await until(() => echoedIn(OWNER).length >= 2, () => `both to be answered (sent: ${JSON.stringify(telegramTexts(OWNER))})`, 30_000);
    await sleep(SETTLE_MS);
    expect(echoedIn(OWNER)).toEqual(expected);
    expect(await inboundRows('telegram', String(retried.update_id))).toBe(1);
    expect(await inboundRows('telegram', String(both.update_id))).toBe(1);
    for (const text of expected) expect(await stored(text)).toBe(1);
  }, 40_000);

  it('many chats at once, their updates alternating between the processes, keep each chat in order', async () => {
    const wrote = (chat: number, i: number) => `chat ${chat} message ${i}`;
    const before = telegramSent().length;
    await Promise.all(
      CHATS.map(async (chat, c) => {
        // One after another in each chat (Telegram sends a chat's next update once the last one is answered).
        for (let i = 1; i <= MESSAGES_PER_CHAT; i++) expect(await postUpdate((c + i) % 2 ? a : b, dmUpdate(chat, wrote(chat, i)))).toBe(200);
      }),
    );
    const answered = (chat: number) => echoedIn(chat, before);
    await until(() => CHATS.every((chat) => answered(chat).includes(wrote(chat, MESSAGES_PER_CHAT))), 'every chat to be answered to its last message', 30_000);
    await sleep(SETTLE_MS);
    for (const chat of CHATS) {
      // Each message answered once, in the order it was written, whichever process took it and whichever sent the reply.
      expect({ chat, answered: answered(chat) }).toEqual({ chat, answered: Array.from({ length: MESSAGES_PER_CHAT }, (_, i) => wrote(chat, i + 1)) });
    }
  }, 40_000);

  // While the first reply waits out its 429 on one process, the other ingress process took the chat's next reply
  // from the outbox and sent it first; now a chat's next message waits for its open one, whichever process has it.
  it("a reply held back by Telegram's rate limit on one process is not overtaken by the chat's next reply on the other", async () => {
    // The next send is refused with a 429: the process sending it waits two seconds and sends it again.
    telegram.failNext('sendMessage', { ok: false, error_code: 429, description: 'Too Many Requests: retry after 2', parameters: { retry_after: 2 } });
    const limited = () => telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === LIMITED);
    expect(await postUpdate(a, dmUpdate(LIMITED, 'first, held back'))).toBe(200);
    await until(() => limited().length > 0, 'the first reply to be refused', 30_000);
    expect(limited()[0].result).toBeUndefined();
    expect(await postUpdate(b, dmUpdate(LIMITED, 'second, while the first waits'))).toBe(200);
    await until(() => echoedIn(LIMITED).length >= 2, () => `both to be answered (sent: ${JSON.stringify(telegramTexts(LIMITED))})`, 30_000);
    await sleep(SETTLE_MS);
    expect(echoedIn(LIMITED)).toEqual(['first, held back', 'second, while the first waits']);
  }, 40_000);

  it('an approval clicked on the other ingress than the one that took the message is resolved once', async () => {
    expect(await postUpdate(a, dmUpdate(OWNER, 'please write alpha'))).toBe(200);
    const question = await until(() => telegramSent().find((m) => m.buttons.some((x) => x.text === 'Allow once') && m.text.includes('alpha')), 'the approval', 30_000);
    const allow = question.buttons.find((x) => x.text === 'Allow once')!;
    const click = () => ({
      update_id: ++nextUpdate,
      callback_query: {
        id: `cq-${nextUpdate}`,
        from: { id: OWNER, is_bot: false, first_name: 'Ana' },
        chat_instance: '1',
        data: allow.callback_data,
        message: { message_id: question.id, date: 0, chat: { id: OWNER, type: 'private' }, text: question.text },
      },
    });
    const first = click();
    expect(await postUpdate(b, first)).toBe(200);
    // The same click delivered again to the other process, and a second press of the button there.
    const second = click();
    expect(await Promise.all([postUpdate(a, first), postUpdate(a, second)])).toEqual([200, 200]);
    await until(() => telegramTexts(OWNER).some((t) => t.startsWith('done: ')), 'the tool to run and the reply', 30_000);
    await until(() => telegram.callsOf('editMessageText').some((c) => c.body.message_id === question.id), 'the question to be updated', 10_000);
    await sleep(SETTLE_MS);
    expect(telegramTexts(OWNER).filter((t) => t.startsWith('done: '))).toHaveLength(1);
    expect(await fs.readFile(path.join(personasDir, 'assistant', 'workspace', 'alpha.txt'), 'utf8')).toBe('written');
    const notices = telegram.callsOf('answerCallbackQuery').map((c) => ({ id: c.body.callback_query_id, text: c.body.text }));
    expect(notices.filter((n) => n.text === 'Allow once: noted.')).toEqual([{ id: first.callback_query.id, text: 'Allow once: noted.' }]);
    expect(notices.filter((n) => n.id === second.callback_query.id)).toEqual([{ id: second.callback_query.id, text: expect.stringMatching(/^Already answered/) }]);
    const edits = telegram.callsOf('editMessageText').filter((c) => c.body.message_id === question.id && c.result !== undefined);
    expect(edits).toHaveLength(1);
    expect(edits[0].body.text).toMatch(/Allowed once/);
  }, 40_000);

  it('refuses an update without the secret, or with a wrong one, on each process', async () => {
    const forged = dmUpdate(OWNER, 'forged update');
    for (const ingress of [a, b]) {
      expect(await postUpdate(ingress, forged, null)).toBe(401);
      expect(await postUpdate(ingress, forged, 'not-the-secret')).toBe(401);
    }
    await sleep(SETTLE_MS);
    expect(await inboundRows('telegram', String(forged.update_id))).toBe(0);
    expect(await stored('forged update')).toBe(0);
    expect(modelSaw('forged update')).toBe(false);
  });
});

describe('Slack HTTP events behind two ingress processes', () => {
  it('an event redelivered to the other ingress, or posted to both at once, is answered once', async () => {
    slack.deliverOverHttp(target(a));
    const first = await slack.dm({ user: SLACK_OWNER, text: 'slack hello, retried on B' });
    expect(first.status).toBe(200);
    slack.deliverOverHttp(target(b));
    expect((await slack.redeliver(first)).status).toBe(200);
    const event = slackDmEvent('slack hello, to both at once');
    const body = slack.eventCallback(event, 'EvMULTI1');
    const copies = [a, b, a, b].map((ingress, i) => postSlack(ingress, signedRequest(body, SIGNING_SECRET, i ? { retryNum: i, retryReason: 'http_timeout' } : {})));
    expect(await Promise.all(copies)).toEqual([200, 200, 200, 200]);
    const expected = ['slack hello, retried on B', 'slack hello, to both at once'];
    await until(() => slackTexts().flatMap(echoedTexts).length >= 2, () => `both to be answered (sent: ${JSON.stringify(slackTexts())})`, 30_000);
    await sleep(SETTLE_MS);
    expect(slackTexts().flatMap(echoedTexts)).toEqual(expected);
    for (const text of expected) expect(await stored(text)).toBe(1);
  }, 40_000);

  it('a question clicked on the other ingress than the one that took the message is answered once', async () => {
    slack.deliverOverHttp(target(a));
    expect((await slack.dm({ user: SLACK_OWNER, text: 'please ask lunch' })).status).toBe(200);
    const asked = () => slack.messages(SLACK_DM).find((m) => m.blocks?.some((x) => x.type === 'actions') && m.text?.includes('lunch'));
    const question = await until(asked, 'the question', 30_000);
    slack.deliverOverHttp(target(b));
    expect((await slack.click({ message: { channel: SLACK_DM, ts: question.ts }, label: 'Tea', user: SLACK_OWNER })).status).toBe(200);
    // A second press on a screen that has not refreshed, on the other process.
    const payload = slack.blockActions({ message: { channel: SLACK_DM, ts: question.ts }, label: 'Tea', user: SLACK_OWNER, stale: true });
    expect(await postSlack(a, signedRequest(interactionForm(payload), SIGNING_SECRET))).toBe(200);
    await until(() => slackTexts().some((t) => t.startsWith('got: ')), 'the answer to reach the persona', 30_000);
    await until(() => (slack.message(SLACK_DM, question.ts)?.edits ?? 0) > 0, 'the question to be updated', 10_000);
    await sleep(SETTLE_MS);
    expect(slackTexts().filter((t) => t.startsWith('got: '))).toEqual(['got: Tea']);
    expect(slack.message(SLACK_DM, question.ts)?.edits).toBe(1);
  }, 40_000);

  it('refuses an unsigned or badly signed request on each process', async () => {
    const event = slackDmEvent('forged slack event');
    const body = slack.eventCallback(event);
    const { 'x-slack-signature': _signature, ...unsigned } = signedRequest(body, SIGNING_SECRET).headers;
    for (const ingress of [a, b]) {
      const statuses = [
        await postSlack(ingress, signedRequest(body, SIGNING_SECRET, { badSignature: true })),
        await postSlack(ingress, signedRequest(body, 'not-the-secret')),
        await postSlack(ingress, { body: JSON.stringify(body), headers: unsigned }),
      ];
      expect({ ingress: ingress.name, statuses }).toEqual({ ingress: ingress.name, statuses: [401, 401, 401] });
    }
    await sleep(SETTLE_MS);
    expect(await inboundRows('slack', `${SLACK_DM}:${event.ts}`)).toBe(0);
    expect(await stored('forged slack event')).toBe(0);
    expect(modelSaw('forged slack event')).toBe(false);
  });
});

describe('across both platforms and both processes', () => {
  it('sent every reply once', () => {
    const texts = [...telegramSent().map((m) => `telegram ${m.chat}: ${m.text}`), ...slackTexts().map((t) => `slack: ${t}`)];
    expect(texts.filter((t, i) => texts.indexOf(t) !== i)).toEqual([]);
  });
});
