// The user model in the system prompt, through the whole app: what the persona noted about a person is in the
// prompt of that person's turns only, bounded, and a group turn carries only its sender's.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { USER_MODEL_PROMPT_MAX_CHARS } from '../../src/agent/prompt.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';

let h: Harness;

beforeAll(async () => {
  // The built-in tools as Parlor starts them, memory included.
  h = await startHarness({ personas: { testy: TEST_PERSONA, other: { soul: 'You are Other.' } } });
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(() => {
  h.fake.reset();
  h.chat.sent.length = 0;
});

async function say(from: string, text: string, chat: { id: string; type: 'dm' | 'group' } = { id: from, type: 'dm' }) {
  const before = h.chat.sent.length;
  await h.chat.inject({ text, chat, sender: { id: from } });
  await h.chat.waitForSent(before + 1);
}

const HEADING = '## What you know of';

describe('the user model in the system prompt', () => {
  it("is written by user_model_write for the sender and shown in that person's turns only", async () => {
    h.fake.script({ toolCalls: [{ name: 'user_model_write', arguments: { dimension: 'diet', content: 'vegan, allergic to cashews', confidence: 0.9 } }] }, { text: 'Noted.' });
    await say('u1', 'I am vegan and allergic to cashews');
    expect(h.fake.requests[1].body.messages.at(-1).content).toBe('noted "diet" for chat:u1');
    // The first turn had nothing to show yet.
    expect(h.fake.requests[0].system).not.toContain(HEADING);

    h.fake.script({ text: 'A salad, then.' });
    await say('u1', 'what should I eat?');
    const system = h.fake.requests[2].system;
    expect(system.startsWith('You are Testy')).toBe(true);
    expect(system).toContain(`${HEADING} chat:u1\n`);
    expect(system).toContain('- diet: vegan, allergic to cashews');
    // After the stable part of the prompt: the soul and the turn's rules come first.
    expect(system.indexOf(HEADING)).toBeGreaterThan(system.indexOf('## This turn'));

    h.fake.script({ text: 'Hello.' });
    await say('u2', 'hi');
    expect(h.fake.requests[3].system).not.toContain(HEADING);
    expect(h.fake.requests[3].system).not.toContain('cashews');
  });

  it('is not shown to another persona', async () => {
    const rows = await h.query<{ n: number }>(sql`select count(*)::int as n from user_models where persona = 'testy' and user_address = 'chat:u1'`);
    expect(rows).toEqual([{ n: 1 }]);
    await h.query(sql`insert into user_models (persona, user_address, dimension, content) values ('other', 'chat:u1', 'pets', 'has a cat named Miso')`);
    h.fake.script({ text: 'Hi.' });
    await say('u1', 'hello again');
    expect(h.fake.requests[0].system).toContain('cashews');
    expect(h.fake.requests[0].system).not.toContain('Miso');
  });

  it("carries only the sender's in a group", async () => {
    await h.query(sql`insert into user_models (persona, user_address, dimension, content) values ('testy', 'chat:u2', 'hobby', 'plays the cello')`);
    h.fake.script({ text: 'Nice.' });
    await say('u2', 'anyone here play music?', { id: 'g2', type: 'group' });
    const system = h.fake.requests[0].system;
    expect(system).toContain(`${HEADING} chat:u2\n`);
    expect(system).toContain('- hobby: plays the cello');
    expect(system).not.toContain('cashews');
    expect(system.split(HEADING)).toHaveLength(2);
  });

  it("is the outsider's in a group turn that read a message from someone who is not one of the persona's users", async () => {
    await h.query(sql`insert into user_models (persona, user_address, dimension, content) values ('testy', 'chat:z9', 'tone', 'prefers short answers')`);
    const group = { id: 'g2', type: 'group' as const };
    // The first turn is slow, so the member's and the outsider's messages after it wait for the same next turn.
    h.fake.script({ text: 'One moment.', delayMs: 400 }, { text: 'Both read.' });
    const before = h.chat.sent.length;
    await h.chat.inject({ text: 'first', chat: group, sender: { id: 'u2' } });
    await h.fake.waitForRequests(1);
    await h.chat.inject({ text: 'second', chat: group, sender: { id: 'u2' } });
    await h.chat.inject({ text: 'me too', chat: group, sender: { id: 'z9', name: 'Zed' } });
    await h.chat.waitForSent(before + 2);
    const system = h.fake.requests[1].system;
    expect(system).toContain(`${HEADING} chat:z9\n`);
    expect(system).toContain('- tone: prefers short answers');
    expect(system).not.toContain('plays the cello');
    await h.app.waitForIdle('testy:chat:g2');
  });

  it('is bounded, the most confident first, saying how many it left out', async () => {
    for (let i = 0; i < 40; i++) {
      await h.query(
        sql`insert into user_models (persona, user_address, dimension, content, confidence) values ('testy', 'chat:u2', ${`topic_${i}`}, ${`detail ${i} `.repeat(20)}, ${i === 7 ? 1 : 0.6})`,
      );
    }
    h.fake.script({ text: 'Sure.' });
    await say('u2', 'what do you know about me?');
    const section = h.fake.requests[0].system.slice(h.fake.requests[0].system.indexOf(HEADING));
    expect(section.length).toBeLessThanOrEqual(USER_MODEL_PROMPT_MAX_CHARS);
    const shown = section.split('\n').filter((l) => /^- \w+: /.test(l));
    // topic_7 (confidence 1), the hobby (0.7), then the rest (0.6).
    expect(shown[0]).toMatch(/^- topic_7: detail 7/);
    expect(shown[1]).toBe('- hobby: plays the cello');
    expect(shown.length).toBeGreaterThan(3);
    expect(section).toMatch(new RegExp(`\\n- \\(${41 - shown.length} more not shown\\)$`));
  });
});
