// What the core does with a connector's capabilities: private answers, threads it opens, reactions and "typing…"
// from a process without the connector, and edits only while the platform allows them.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import type { App } from '../../src/app.ts';
import type { RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const lastToolResult = (req: RecordedRequest) =>
  (req.body.messages as { role: string; content: string }[]).findLast((m) => m.role === 'tool')?.content;

describe('answers that concern one person', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ connector: { capabilities: { privateReplies: true } } });
  });
  afterAll(() => h?.stop());
  beforeEach(() => {
    h.fake.reset();
    h.chat.sent.length = 0;
  });

  it('/status and /help in a group are shown to the sender alone; /stop, which concerns everyone, is not', async () => {
    await h.chat.inject({ text: '/status', chat: { id: 'g2', type: 'group' }, sender: { id: 'u2', name: 'Bo' }, messageId: 'm-status' });
    await h.chat.inject({ text: '/help', chat: { id: 'g2', type: 'group' }, sender: { id: 'u2', name: 'Bo' } });
    await h.chat.inject({ text: '/stop', chat: { id: 'g2', type: 'group' }, sender: { id: 'u2', name: 'Bo' } });
    const sent = await h.chat.waitForSent(3);
    const status = sent.find((m) => m.text.startsWith('Persona:'))!;
    expect(status).toMatchObject({ chat: 'g2', privateTo: 'u2', replyTo: 'm-status' });
    expect(sent.find((m) => m.text.includes('/new'))?.privateTo).toBe('u2');
    expect(sent.find((m) => m.text === 'Nothing is running.')?.privateTo).toBeUndefined();
    expect(h.fake.requests).toHaveLength(0);
  });

  it('a refusal to someone who may not change the group is shown to them alone', async () => {
    await h.chat.inject({ text: '/new', chat: { id: 'g2', type: 'group' }, sender: { id: 'x9', name: 'Eve' } });
    const [refusal] = await h.chat.waitForSent(1);
    expect(refusal).toMatchObject({ text: 'Only the people I work for can use /new here.', privateTo: 'x9' });
  });

  it('in a DM nothing is marked private: the chat is theirs already', async () => {
    await h.chat.inject({ text: '/status' });
    const [status] = await h.chat.waitForSent(1);
    expect(status.privateTo).toBeUndefined();
  });
});

describe('a connector that cannot answer privately', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.stop());

  it('answers /status in the group, replying to the message that asked', async () => {
    await h.chat.inject({ text: '/status', chat: { id: 'g2', type: 'group' }, sender: { id: 'u2', name: 'Bo' }, messageId: 'm-ask' });
    const [status] = await h.chat.waitForSent(1);
    expect(status).toMatchObject({ chat: 'g2', replyTo: 'm-ask' });
    expect(status.privateTo).toBeUndefined();
  });
});

describe('a thread the connector opens for a reply', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ connector: { opensThreads: true } });
  });
  afterAll(() => h?.stop());
  beforeEach(() => {
    h.fake.reset();
    h.chat.sent.length = 0;
  });

  it('follow-ups posted in it continue the conversation of the mention, without a mention', async () => {
    await h.chat.inject({ text: '@testy what is up', chat: { id: 'g1', type: 'group' }, mentioned: true, messageId: 'm-100' });
    const [first] = await h.chat.waitForSent(1);
    expect(first).toMatchObject({ chat: 'g1', replyTo: 'm-100', thread: 't-m-100' });
    await h.app.waitForIdle('testy:chat:g1');

    const followUp = await h.chat.inject({ text: 'and then?', chat: { id: 'g1', type: 'group', thread: 't-m-100' }, messageId: 'm-101' });
    expect(followUp).toEqual({ status: 'queued', conversationId: 'testy:chat:g1' });
    const [, second] = await h.chat.waitForSent(2);
    expect(second).toMatchObject({ chat: 'g1', thread: 't-m-100' });
    expect(second.text).toContain('and then?');
    // One conversation: the follow-up's model call has the mention before it.
    const contents = JSON.stringify(h.fake.requests[1].body.messages);
    expect(contents).toContain('what is up');
    await h.app.waitForIdle('testy:chat:g1');
  });

  it('a thread the bot did not open still needs a mention', async () => {
    const result = await h.chat.inject({ text: 'unrelated', chat: { id: 'g1', type: 'group', thread: 't-elsewhere' } });
    expect(result.status).toBe('ignored');
    await sleep(300);
    expect(h.chat.sent).toHaveLength(0);
  });

  it('a typed answer in that thread finds the question asked there', async () => {
    await h.chat.inject({ text: '@testy plan it', chat: { id: 'g1', type: 'group' }, mentioned: true, messageId: 'm-200' });
    const [first] = await h.chat.waitForSent(1);
    expect(first.thread).toBe('t-m-200');
    await h.app.waitForIdle('testy:chat:g1');
    h.fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Which day?' } }] }, (req) => ({ text: `got: ${req.lastUserText}` }));
    await h.chat.inject({ text: 'go on', chat: { id: 'g1', type: 'group', thread: 't-m-200' }, messageId: 'm-201' });
    const [, question] = await h.chat.waitForSent(2);
    expect(question.text).toContain('Which day?');
    expect(question.thread).toBe('t-m-200');
    const answer = await h.chat.inject({ text: 'friday', chat: { id: 'g1', type: 'group', thread: 't-m-200' } });
    expect(answer).toEqual({ status: 'click', conversationId: 'testy:chat:g1' });
    const [, , reply] = await h.chat.waitForSent(3);
    expect(reply.text).toMatch(/^got: \[answer to Q#[\w-]+ "Which day\?" \(via .+\)\]\nfriday$/);
    expect(reply.thread).toBe('t-m-200');
    await h.app.waitForIdle('testy:chat:g1');
  });
});

describe('a connector whose threads the bot posts in become the persona\'s', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ connector: { capabilities: { ownsReplyThreads: true }, sendDelayMs: 1000 } });
  });
  afterAll(() => h?.stop());

  it('an answer typed in the thread while the bot is still posting there continues the conversation', async () => {
    await h.chat.inject({ text: '@testy deploy it', chat: { id: 'g1', type: 'group', thread: 't9' }, mentioned: true, messageId: 'm-t9' });
    // The reply is on its way (the platform takes a second): the thread is the persona's before the send begins.
    await until(async () => (await h.query(sql`select 1 from conversation_threads where chat = 'g1' and thread = 't9'`)).length === 1, 'the thread to be the persona\'s');
    expect(await h.query(sql`select 1 from outbound_messages where chat = 'g1' and status = 'sending'`)).toHaveLength(1);
    const followUp = await h.chat.inject({ text: 'and to staging', chat: { id: 'g1', type: 'group', thread: 't9' } });
    expect(followUp).toEqual({ status: 'queued', conversationId: 'testy:chat:g1:t9' });
    await h.chat.waitForSent(2);
    await h.app.waitForIdle('testy:chat:g1:t9');
  });
});

describe('reactions and "typing…"', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ connector: { capabilities: { react: true, typing: true } } });
  });
  afterAll(() => h?.stop());
  beforeEach(() => {
    h.fake.reset();
    h.chat.sent.length = 0;
    h.chat.reactions.length = 0;
    h.chat.typings.length = 0;
  });

  it('react sets the emoji on the message being answered, once, and refuses a name instead of an emoji', async () => {
    h.fake.script(
      { toolCalls: [{ name: 'react', arguments: { emoji: ':thumbsup:' } }] },
      { toolCalls: [{ name: 'react', arguments: { emoji: '👍' } }] },
      { text: 'ok' },
    );
    await h.chat.inject({ text: 'thanks!', messageId: 'm-react' });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    expect(lastToolResult(h.fake.requests[1])).toBe('error: ":thumbsup:" is not an emoji; write the emoji itself, e.g. "👍", not its name');
    expect(lastToolResult(h.fake.requests[2])).toBe('reacted with 👍');
    expect(h.chat.reactions).toEqual([{ chat: 'u1', messageId: 'm-react', emoji: '👍' }]);
    const ledger = await h.query<{ kind: string; status: string }>(sql`select kind, status from outbound_messages where kind = 'reaction'`);
    expect(ledger).toEqual([{ kind: 'reaction', status: 'sent' }]);
  });

});

describe('reactions and "typing…" from a worker process without the connector', () => {
  let h: Harness;
  let worker: App;
  beforeAll(async () => {
    // The harness's app runs the connector and takes no turns; the peer takes them and has no connector.
    h = await startHarness({ connector: { capabilities: { react: true, typing: true } }, app: { worker: false } });
    worker = await h.startPeer();
  });
  afterAll(() => h?.stop());

  it('reach the chat through the process that runs the connector', async () => {
    h.fake.script({ toolCalls: [{ name: 'react', arguments: { emoji: '🎉' } }], delayMs: 300 }, { text: 'done', delayMs: 300 });
    await h.chat.inject({ text: 'we shipped it', messageId: 'm-ship' });
    await h.chat.waitForSent(1);
    await until(() => h.chat.reactions.length === 1, 'the reaction');
    expect(h.chat.reactions).toEqual([{ chat: 'u1', messageId: 'm-ship', emoji: '🎉' }]);
    expect(lastToolResult(h.fake.requests[1])).toBe("reaction 🎉 queued (it is set by the process that runs this chat's connector)");
    expect(h.chat.typings.length).toBeGreaterThan(0);
    expect(h.chat.typings[0]).toEqual({ chat: 'u1' });
    await worker.waitForIdle('testy:chat:u1');
  });
});

describe('edits only while the platform allows them', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ connector: { buttons: true, capabilities: { edits: { windowMs: 1, perMinute: { dm: 60, group: 20 } } } } });
  });
  afterAll(() => h?.stop());

  it('a question answered after its message can no longer be edited gets its outcome as a reply to it', async () => {
    h.fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Ship it?', choices: ['Yes', 'No'] } }] }, { text: 'shipping' });
    await h.chat.inject({ text: 'ready?' });
    const [question] = await h.chat.waitForSent(1);
    const yes = question.buttons![0][0];
    expect(yes.label).toBe('Yes');
    await sleep(20);
    await h.chat.inject({ kind: 'click', text: '', data: yes.data, messageId: 'out-1' });
    const sent = await until(() => (h.chat.sent.some((m) => /^Q#[\w-]+: ✅ Yes \(answered by .+\)$/.test(m.text)) ? h.chat.sent : undefined), () => `the outcome; sent ${JSON.stringify(h.chat.sent.map((m) => m.text))}`);
    expect(sent.find((m) => m.text.startsWith('Q#'))?.replyTo).toBe('out-1');
    expect(h.chat.edits).toEqual([]);
    await h.app.waitForIdle('testy:chat:u1');
  });
});
