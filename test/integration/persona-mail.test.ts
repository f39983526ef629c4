// Persona to persona: send_to_persona and its reply in the sender's inbox, ask_persona waiting for the reply (or
// not, past its timeout), and what is refused: yourself, unknown personas, those that do not take your messages,
// and loops.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import type { FakeReply, RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;

const lastMessage = (req: RecordedRequest) => (req.body.messages as { role: string; content: string }[]).at(-1)!;
const isScout = (req: RecordedRequest) => req.system.startsWith('You are Scout');
const isInboxWake = (req: RecordedRequest) => req.lastUserText.startsWith('[reply from persona');

/** What testy does when its person writes, and what scout answers; each test tells its own story. */
let testy: (req: RecordedRequest) => FakeReply;
let scout: (req: RecordedRequest) => FakeReply;

/** Testy calls one tool, then says what it returned. */
function calling(name: string, args: Record<string, unknown>) {
  return (req: RecordedRequest): FakeReply =>
    lastMessage(req).role === 'tool' ? { text: `tool said: ${lastMessage(req).content}` } : { toolCalls: [{ name, arguments: args }] };
}

beforeAll(async () => {
  h = await startHarness({
    personas: {
      testy: { ...TEST_PERSONA, connectors: { ...(TEST_PERSONA.connectors as object), personas: ['scout'] } },
      scout: { soul: 'You are Scout, who finds things out.', connectors: { personas: ['testy'] } },
      locked: { soul: 'You are Locked.' },
    },
    // A waiting asker learns of its reply from the notification alone: the fallback look comes only after a minute.
    app: { personaAskRecheckMs: 60_000 },
  });
  h.fake.setDefault((req) => {
    if (isScout(req)) return scout(req);
    if (isInboxWake(req)) return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
    return testy(req);
  });
});
afterAll(() => h?.stop());
beforeEach(() => {
  h.fake.requests.length = 0;
  h.chat.sent.length = 0;
});
afterEach(async () => {
  await until(async () => (await h.query(sql`select 1 from turns where status = 'running'`)).length === 0, 'every turn to end', 20_000);
  await h.app.waitForIdle('testy:chat:u1');
});

const toolSaid = () => until(() => h.chat.sent.find((m) => m.text.startsWith('tool said: '))?.text, 'testy to say what the tool returned', 20_000);

describe('send_to_persona', () => {
  it('returns at once; the other persona answers under its own soul, and the reply comes back to the sender as a wake', async () => {
    testy = calling('send_to_persona', { persona: 'scout', text: 'what is the weather?' });
    scout = () => ({ text: 'sunny all week', delayMs: 300 });
    await h.chat.inject({ text: 'ask scout about the weather' });
    expect(await toolSaid()).toBe('tool said: sent to scout; its reply arrives as a message from it when it has answered');
    const wake = await until(() => h.fake.requests.find(isInboxWake), 'the reply in testy\'s inbox', 20_000);
    expect(wake.lastUserText).toBe('[reply from persona scout]\nsunny all week');
    const asked = h.fake.requests.find(isScout)!;
    expect(asked.lastUserText).toBe('[message from persona testy]\nwhat is the weather?');
    expect(asked.system).toContain('This is a message from the persona "testy"');
    expect(asked.system).not.toContain('You are Testy');
    await h.app.waitForIdle('testy:inbox:scout');
    const conversations = await h.query<{ id: string }>(sql`select id from conversations where id like '%:inbox:%' order by id`);
    expect(conversations.map((c) => c.id)).toEqual(['scout:inbox:testy', 'testy:inbox:scout']);
  });
});

describe('ask_persona', () => {
  it('waits for the reply and returns it; nothing goes to the inbox, and a second ask sees the first exchange', async () => {
    testy = calling('ask_persona', { persona: 'scout', text: 'what is six times seven?' });
    scout = () => ({ text: '42' });
    const asked = Date.now();
    await h.chat.inject({ text: 'ask scout a sum' });
    expect(await toolSaid()).toBe('tool said: 42');
    // Woken by the notification that the reply is there, not by a look that comes a minute later.
    expect(Date.now() - asked).toBeLessThan(15_000);
    h.chat.sent.length = 0;
    testy = calling('ask_persona', { persona: 'scout', text: 'and plus one?' });
    scout = (req) => ({ text: (req.body.messages as { content: string }[]).some((m) => String(m.content).includes('six times seven')) ? '43' : 'plus one of what?' });
    await h.chat.inject({ text: 'and one more' });
    expect(await toolSaid()).toBe('tool said: 43');
    await new Promise((r) => setTimeout(r, 500));
    expect(h.fake.requests.filter(isInboxWake)).toHaveLength(0);
  });

  it('past its timeout it says the reply will come as a message, and the reply does come, once', async () => {
    testy = calling('ask_persona', { persona: 'scout', text: 'think about it slowly', timeout_s: 1 });
    scout = () => ({ text: 'slow answer', delayMs: 2500 });
    const started = Date.now();
    await h.chat.inject({ text: 'a slow question' });
    expect(await toolSaid()).toBe('tool said: no reply from scout within 1 s; it arrives as a message from it when it has answered');
    expect(Date.now() - started).toBeLessThan(2500);
    const wake = await until(() => h.fake.requests.find(isInboxWake), 'the late reply in testy\'s inbox', 20_000);
    expect(wake.lastUserText).toBe('[reply from persona scout]\nslow answer');
    await h.app.waitForIdle('testy:inbox:scout');
    expect(h.fake.requests.filter(isInboxWake)).toHaveLength(1);
  });
});

describe('what is refused', () => {
  it.each([
    ['yourself', { persona: 'testy', text: 'hi me' }, 'refused: that is you; a persona cannot write to itself'],
    ['an unknown persona', { persona: 'ghost', text: 'boo' }, 'refused: no persona named "ghost" (there are: locked, scout)'],
    ['a persona that does not take your messages', { persona: 'locked', text: 'open up' }, 'refused: locked does not take messages from testy; its connectors.jsonc would have to list "testy" in "personas"'],
  ])('%s', async (_what, args, refusal) => {
    testy = calling('ask_persona', args);
    await h.chat.inject({ text: `try ${args.persona}` });
    expect(await toolSaid()).toBe(`tool said: ${refusal}`);
    expect(h.fake.requests.filter(isScout)).toHaveLength(0);
  });

  it('a loop: scout, asked by testy, cannot ask testy back within the same chain', async () => {
    testy = calling('ask_persona', { persona: 'scout', text: 'ask me back' });
    scout = (req) =>
      lastMessage(req).role === 'tool' ? { text: `scout got: ${lastMessage(req).content}` } : { toolCalls: [{ name: 'ask_persona', arguments: { persona: 'testy', text: 'what do you think?' } }] };
    await h.chat.inject({ text: 'start a loop' });
    expect(await toolSaid()).toBe('tool said: scout got: refused: a loop: testy → scout → testy; answer without asking testy again');
  });
});
