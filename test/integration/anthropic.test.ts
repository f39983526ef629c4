import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
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
    expect(h.fake.requests[0].system).toContain('You are Testy');
    const toolResult = h.fake.requests[1].body.messages.at(-1).content[0];
    expect(toolResult).toMatchObject({ type: 'tool_result' });
    expect(String(toolResult.content)).toContain('ISO (UTC)');
  });

  it('marks the system prompt and the last message before the new input for the prompt cache, and records cached tokens', async () => {
    const dm = (text: string) => h.chat.inject({ text, chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    h.fake.reset();
    h.fake.script({ text: 'First answer.' }, { text: 'Second answer.', usage: { input: 3000, output: 12, cacheRead: 2400, cacheWrite: 500 } });
    await dm('first question');
    await h.chat.waitForSent(2);
    await h.app.waitForIdle('testy:chat:u2');
    await dm('second question');
    await h.chat.waitForSent(3);
    await h.app.waitForIdle('testy:chat:u2');
    const [, second] = h.fake.requests;
    expect(second.body.system).toEqual([{ type: 'text', text: second.system, cache_control: { type: 'ephemeral' } }]);
    const marked = (second.body.messages as { role: string; content: { type: string; text?: string; cache_control?: unknown }[] }[]).flatMap((m) =>
      m.content.filter((b) => b.cache_control).map((b) => ({ role: m.role, text: b.text, cache_control: b.cache_control })),
    );
    // The previous turn's answer is the last stable message; the new question comes after the breakpoint.
    expect(marked).toEqual([{ role: 'assistant', text: 'First answer.', cache_control: { type: 'ephemeral' } }]);
    expect(second.body.messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'text', text: 'second question' }] });
    const rows = await h.query<{ usage: unknown }>(
      sql`select content->'usage' as usage from messages where conversation_id = 'testy:chat:u2' and role = 'assistant' order by id desc limit 1`,
    );
    expect(rows).toEqual([{ usage: { input: 3000, output: 12, cacheRead: 2400, cacheWrite: 500 } }]);
    // The turn's totals carry the cache counts, and /status shows what came from the cache.
    const [turn] = await h.query<{ input_tokens: number; cache_read_tokens: number; cache_write_tokens: number }>(
      sql`select input_tokens, cache_read_tokens, cache_write_tokens from turns where conversation_id = 'testy:chat:u2' order by started_at desc limit 1`,
    );
    expect(turn).toEqual({ input_tokens: 3000, cache_read_tokens: 2400, cache_write_tokens: 500 });
    await dm('/status');
    const [status] = (await h.chat.waitForSent(4)).slice(-1);
    expect(status.text).toMatch(/tokens: \d+ in \(2400 from the prompt cache\), \d+ out/);
  });
});
