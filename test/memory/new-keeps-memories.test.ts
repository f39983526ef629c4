// /new through the whole app: the next turn starts without the earlier messages, and recall still finds what the
// persona saved before them.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.stop();
});

async function say(text: string, replies = 1) {
  const before = h.chat.sent.length;
  await h.chat.inject({ text });
  await h.chat.waitForSent(before + replies);
}

describe('/new', () => {
  it('starts afresh and keeps memories', async () => {
    h.fake.script(
      { toolCalls: [{ name: 'memory', arguments: { action: 'write', category: 'person', content: 'Marguerite keeps bees on her allotment', importance: 7 } }] },
      { text: 'I will remember that.' },
    );
    await say('my aunt Marguerite keeps bees on her allotment');
    const saved = String(h.fake.requests[1].body.messages.at(-1).content);
    const id = Number(/^saved \[memory (\d+)\]/.exec(saved)?.[1]);
    expect(id).toBeGreaterThan(0);

    await say('/new');
    expect(h.chat.sent.at(-1)!.text).toBe('Starting fresh: I will not see the earlier messages of this chat.');

    h.fake.reset();
    // A misspelt name, as a person would type it.
    h.fake.script({ toolCalls: [{ name: 'recall', arguments: { query: 'Margerite bees' } }] }, { text: 'Your aunt keeps bees.' });
    await say('what does my aunt Margerite do?');
    // The history is gone: the first request of the turn holds only the new message.
    expect(h.fake.requests[0].body.messages.slice(1)).toEqual([{ role: 'user', content: 'what does my aunt Margerite do?' }]);
    expect(JSON.stringify(h.fake.requests[0].body)).not.toContain('allotment');
    // The memory is not: recall found it, with the id the write gave.
    const recalled = String(h.fake.requests[1].body.messages.at(-1).content);
    expect(recalled).toMatch(new RegExp(`^1 memory "Margerite bees":\\n\\n\\[memory ${id}\\] .* · person · importance 7\\nMarguerite keeps bees on her allotment$`));
    expect(h.chat.sent.at(-1)!.text).toBe('Your aunt keeps bees.');
    const rows = await h.query<{ content: string }>(sql`select content from memories where persona = 'testy'`);
    expect(rows).toEqual([{ content: 'Marguerite keeps bees on her allotment' }]);
  });
});
