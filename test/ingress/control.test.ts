// Control commands in a shared group conversation: anyone in an owned group may talk to the persona, but only its
// own people may wipe (/new) or reconfigure (/think) the conversation everyone there shares.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { InboundEvent } from '../../src/connector.ts';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;
const GROUP = { id: 'g2', type: 'group' as const };
const CONVERSATION = 'testy:chat:g2';
const ZED = { id: 'z9', name: 'Zed' };
const ANA = { id: 'u1', name: 'Ana' };

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.stop());
beforeEach(async () => {
  await h.app.waitForIdle(CONVERSATION, 10_000);
  h.fake.reset();
  h.chat.sent.length = 0;
});

/** Sends a command into the group and resolves with the reply it got. */
async function command(text: string, extra: Partial<InboundEvent> = {}): Promise<string> {
  const before = h.chat.sent.length;
  const result = await h.chat.inject({ text, chat: GROUP, ...extra });
  expect(result).toEqual({ status: 'command', conversationId: CONVERSATION });
  const sent = await h.chat.waitForSent(before + 1);
  expect(sent.slice(before)).toHaveLength(1);
  return sent[before].text;
}

async function conversationState(): Promise<{ historyAfterId: number; thinking: boolean }> {
  const [row] = await h.query<{ historyAfterId: number; thinking: boolean }>(
    sql`select history_after_id::int as "historyAfterId", thinking from conversations where id = ${CONVERSATION}`,
  );
  return row;
}

/** Ana (a user) says something in the group, so that the shared conversation has history. */
async function talkInGroup(text: string) {
  const before = h.chat.sent.length;
  await h.chat.inject({ text, chat: GROUP, sender: ANA });
  await h.chat.waitForSent(before + 1);
  await h.app.waitForIdle(CONVERSATION, 10_000);
}

describe('control commands in a group', () => {
  it("a member who is not one of the persona's users cannot /new or /think the shared conversation, and nothing changes", async () => {
    await talkInGroup('the plan is banana');
    const before = await conversationState();
    expect(before.thinking).toBe(false);
    const modelCalls = h.fake.requests.length;

    expect(await command('/new', { sender: ZED })).toBe('Only the people I work for can use /new here.');
    expect(await command('/think on', { sender: ZED })).toBe('Only the people I work for can use /think here.');
    expect(await command('/think', { sender: ZED })).toBe('Only the people I work for can use /think here.');
    expect(await conversationState()).toEqual(before);
    expect(h.fake.requests).toHaveLength(modelCalls);

    // The next turn still sees the history, at normal thinking.
    await talkInGroup('what is the plan?');
    const contents = JSON.stringify(h.fake.requests.at(-1)!.body.messages);
    expect(contents).toContain('the plan is banana');
    expect(h.fake.requests.at(-1)!.body.reasoning_effort).toBeUndefined();
  });

  it("the persona's users can, in the same group", async () => {
    await talkInGroup('remember kiwi');
    expect(await command('/think on', { sender: ANA })).toBe('Thinking harder on every answer in this chat.');
    expect((await conversationState()).thinking).toBe(true);
    expect(await command('/think off', { sender: ANA })).toBe('Back to normal thinking.');
    expect(await command('/new', { sender: ANA })).toBe('Starting fresh: I will not see the earlier messages of this chat.');
    await talkInGroup('what did I ask you to remember?');
    expect(JSON.stringify(h.fake.requests.at(-1)!.body.messages)).not.toContain('kiwi');
  });

  it('anyone in the group may still ask /status and /help; a platform event claiming to be the local owner gets no more', async () => {
    expect(await command('/status', { sender: ZED })).toContain(`Conversation: ${CONVERSATION}`);
    expect(await command('/help', { sender: ZED })).toMatch(/^Commands:/);
    // Only a local connector (the terminal) may vouch for its sender.
    expect(await command('/think on', { sender: ZED, trusted: true })).toBe('Only the people I work for can use /think here.');
    expect((await conversationState()).thinking).toBe(false);
  });
});

describe('control commands in a DM', () => {
  it('the sender is one of the persona\'s users: /think works as before', async () => {
    const before = h.chat.sent.length;
    await h.chat.inject({ text: '/think on', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    const sent = await h.chat.waitForSent(before + 1);
    expect(sent[before].text).toBe('Thinking harder on every answer in this chat.');
  });
});
