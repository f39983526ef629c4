import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ provider: 'anthropic' });
});
afterAll(async () => {
  await h?.stop();
});

describe('with LLM_PROVIDER=anthropic', () => {
  it('runs a tool call round trip through the Messages API and replies', async () => {
    h.fake.script({ text: 'Let me look.', toolCalls: [{ name: 'clock', arguments: { timezone: 'UTC' } }] }, { text: 'It is daytime somewhere.' });
    await h.chat.inject({ text: 'what time is it?' });
    const [reply] = await h.chat.waitForSent(1);
    expect(reply.text).toBe('It is daytime somewhere.');
    expect(h.fake.requests.map((r) => r.api)).toEqual(['anthropic', 'anthropic']);
    expect(h.fake.requests[0].body.system).toContain('You are Testy');
    const toolResult = h.fake.requests[1].body.messages.at(-1).content[0];
    expect(toolResult).toMatchObject({ type: 'tool_result' });
    expect(String(toolResult.content)).toContain('ISO (UTC)');
  });
});
