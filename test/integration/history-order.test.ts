// A message that arrives while the turn before it is giving its answer (or handling a reminder) is read by the next
// turn after everything that turn wrote: the model sees the conversation in the order it was read, ending with the
// person's message.
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

  it('a message that arrived while a reminder was being handled comes after everything that turn wrote', async () => {
    h.fake.reset();
    h.chat.sent.length = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let wakeStarted!: () => void;
    const waking = new Promise<void>((r) => (wakeStarted = r));
    h.fake.setDefault(async (req) => {
      const messages: { role: string; content: unknown }[] = req.body.messages;
      const last = messages[messages.length - 1];
      if (req.lastUserText.startsWith('[reminder')) {
        if (last.role === 'tool') return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
        wakeStarted();
        await gate;
        return { toolCalls: [{ name: 'reply_to_origin', arguments: { text: 'time to stretch' } }] };
      }
      if (req.lastUserText === 'remind me') {
        if (last.role === 'tool') return { text: 'I will.' };
        return { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'stretch', prompt: 'stretch', in_seconds: 1 } }] };
      }
      return { text: `echo: ${req.lastUserText}` };
    });
    await h.chat.inject({ text: 'remind me' });
    await waking;
    await h.chat.inject({ text: 'hello' });
    release();
    await h.chat.waitForSent(3, 15_000);
    expect(h.chat.sent.map((m) => m.text)).toEqual(['I will.', 'time to stretch', 'echo: hello']);
    const last = roles(h.fake.requests[h.fake.requests.length - 1]);
    expect(last[last.length - 1]).toBe('user: hello');
    expect(last.indexOf('user: hello')).toBeGreaterThan(last.findIndex((m) => m.startsWith('user: [reminder')));
    await h.app.waitForIdle('testy:chat:u1');
  });
});
