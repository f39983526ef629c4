// A message that arrives while the turn before it is giving its answer is read by the next turn after that answer,
// as it happened: the model sees the conversation in the order it took place, ending with the person's message.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.stop());

const roles = (req: RecordedRequest) =>
  (req.body.messages as { role: string; content: unknown }[]).filter((m) => m.role !== 'system').map((m) => `${m.role}: ${String(m.content)}`);

describe('the order of a conversation the model sees', () => {
  it('a message that arrived during the last model call of the turn before comes after that turn’s answer', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.fake.script(
      async () => {
        await gate;
        return { text: 'the answer to one' };
      },
      { text: 'the answer to two' },
    );
    await h.chat.inject({ text: 'one' });
    await h.fake.waitForRequests(1);
    // Stored while the first turn's only model call is under way: too late for that call.
    await h.chat.inject({ text: 'two' });
    release();
    await h.chat.waitForSent(2);
    expect(h.chat.sent.map((m) => m.text)).toEqual(['the answer to one', 'the answer to two']);
    const second = roles(h.fake.requests[h.fake.requests.length - 1]);
    expect(second.slice(-3)).toEqual(['user: one', 'assistant: the answer to one', 'user: two']);
    await h.app.waitForIdle('testy:chat:u1');
  });
});
