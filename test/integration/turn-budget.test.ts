import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { DEFAULT_HISTORY_BUDGET } from '../../src/agent/history.ts';
import { insertMessage } from '../../src/db/messages.ts';
import type { Tool } from '../../src/tools/types.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';

let h: Harness;
let markStarted: () => void = () => {};
let release: () => void = () => {};

/** A tool that runs until the test lets it finish, so messages can arrive while it runs. */
const longTask: Tool = {
  name: 'long_task',
  description: 'runs until released',
  parameters: { type: 'object', properties: {} },
  timeoutMs: 120_000,
  async run() {
    const released = new Promise<void>((resolve) => (release = resolve));
    markStarted();
    await released;
    return 'long task finished';
  },
};

beforeAll(async () => {
  h = await startHarness({ personas: { testy: TEST_PERSONA }, app: { tools: [...createBuiltinTools({ timezone: 'UTC' }), longTask] } });
});
afterAll(async () => {
  await h?.stop();
});

const dm = (text: string) => h.chat.inject({ text, chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1' } });

describe('a turn within its budget', () => {
  it('2,000 messages arriving during one tool call: the next model request stays bounded while every message is stored', async () => {
    const started = new Promise<void>((resolve) => (markStarted = resolve));
    h.fake.script({ toolCalls: [{ name: 'long_task', arguments: {} }] }, { text: 'caught up' });
    await dm('start the long task');
    await started;
    const arrived = (i: number) => `note ${i}: ${'x'.repeat(1_000)}`;
    // The first 1,999 are written as the ingress writes a message, in one transaction: 2,000 deliveries through the
    // whole pipeline (and the 2,000 turn jobs they leave behind) take most of a minute on a small machine. The last
    // one comes through the pipeline.
    await h.app.database.db.transaction(async (tx) => {
      for (let i = 1; i < 2_000; i++) {
        await insertMessage(tx, { conversationId: 'testy:chat:u1', message: { role: 'user', content: arrived(i) }, sender: 'chat:u1', externalId: `bulk-${i}` });
      }
    });
    await dm(arrived(2_000));
    release();
    await h.chat.waitForSent(1, 30_000);
    await h.app.waitForIdle('testy:chat:u1', 30_000);

    expect(h.chat.sent.map((m) => m.text)).toEqual(['caught up']);
    expect(h.fake.requests).toHaveLength(2);
    const second = h.fake.requests[1].body;
    expect(Buffer.byteLength(JSON.stringify(second))).toBeLessThan(2 * DEFAULT_HISTORY_BUDGET.maxChars);
    const contents: string[] = second.messages.map((m: { content: string | null }) => m.content ?? '');
    const noteAt = contents.findIndex((c) => /^\[Parlor\] \d+ more messages arrived while you were working; only the latest \d+ are shown\.$/.test(c));
    expect(noteAt).toBeGreaterThan(0);
    expect(contents).toContain('start the long task');
    expect(contents).toContain('long task finished');

    // All 2,000 are in the transcript, read by the turn that was running; the request shows the newest of them.
    const stored = await h.query<{ content: { content: string }; turn_id: string }>(
      sql`select content, turn_id from messages where conversation_id = 'testy:chat:u1' and role = 'user' order by id`,
    );
    expect(stored).toHaveLength(2_001);
    expect(new Set(stored.map((r) => r.turn_id)).size).toBe(1);
    expect(new Set(stored.slice(1).map((r) => r.content.content))).toEqual(new Set(Array.from({ length: 2_000 }, (_, k) => arrived(k + 1))));
    const shown = contents.slice(noteAt + 1);
    expect(shown).toEqual(stored.slice(-shown.length).map((r) => r.content.content));
  }, 60_000);
});
