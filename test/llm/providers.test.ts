// Both model clients through the ModelClient interface, against the fake LLM server,
// plus the retry wrappers (withModelRetries over a real client, and withRetries itself).
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { createOpenAiClient } from '#src/llm/openai.ts';
import { createAnthropicClient } from '#src/llm/anthropic.ts';
import { withModelRetries } from '#src/llm/index.ts';
import { withRetries } from '#src/retry.ts';
import { ModelError, type ChatMessage, type ModelClient, type ModelRequest, type ToolSpec } from '#src/llm/types.ts';

let fake: FakeLlm;
beforeEach(async () => {
  fake = await startFakeLlm();
});
afterEach(async () => {
  await fake.close();
});

const SYSTEM = 'You are a test persona. Be terse.';
const tools: ToolSpec[] = [
  { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  { name: 'end_task', description: 'Finish the task', parameters: { type: 'object', properties: {} } },
];
const req = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  model: 'fake-model',
  system: SYSTEM,
  messages: [{ role: 'user', content: 'hello' }],
  tools,
  ...over,
});

/** Runs `fn` and returns what it threw (fails the test if it resolves). */
async function caught(fn: () => Promise<unknown>): Promise<ModelError> {
  try {
    await fn();
  } catch (err) {
    return err as ModelError;
  }
  throw new Error('expected the call to throw');
}

const providers = [
  { api: 'openai' as const, make: (o: { stallMs?: number } = {}) => createOpenAiClient({ baseUrl: fake.openaiBaseUrl, apiKey: 'test', ...o }) },
  { api: 'anthropic' as const, make: (o: { stallMs?: number } = {}) => createAnthropicClient({ baseUrl: fake.anthropicBaseUrl, apiKey: 'test', ...o }) },
];

describe.each(providers)('$api client', ({ api, make }) => {
  let client: ModelClient;
  beforeEach(() => {
    client = make();
  });

  it('reports its provider and streams text deltas that join to the full text', async () => {
    expect(client.provider).toBe(api);
    const text = 'Hello there, this answer arrives in several streamed pieces.';
    fake.script({ text });
    const deltas: string[] = [];
    const res = await client.complete(req(), (d) => deltas.push(d));
    expect(res.text).toBe(text);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe(text);
    expect(res.toolCalls).toEqual([]);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].api).toBe(api);
    expect(fake.requests[0].stream).toBe(true);
    expect(fake.requests[0].model).toBe('fake-model');
  });

  it('returns tool calls in order with their name, id and JSON arguments', async () => {
    fake.script({
      toolCalls: [
        { id: 'c1', name: 'get_weather', arguments: { city: 'Paris' } },
        { id: 'c2', name: 'end_task', arguments: {} },
      ],
    });
    const res = await client.complete(req());
    expect(res.toolCalls.map((c) => [c.id, c.name])).toEqual([['c1', 'get_weather'], ['c2', 'end_task']]);
    expect(JSON.parse(res.toolCalls[0].arguments)).toEqual({ city: 'Paris' });
    expect(JSON.parse(res.toolCalls[1].arguments)).toEqual({});
    expect(res.stopReason).toBe(api === 'openai' ? 'tool_calls' : 'tool_use');
    expect(fake.requests[0].toolNames).toEqual(['get_weather', 'end_task']);
  });

  it('sends the system prompt', async () => {
    await client.complete(req());
    expect(fake.requests[0].system).toBe(SYSTEM);
    if (api === 'openai') expect(fake.requests[0].body.messages[0]).toEqual({ role: 'system', content: SYSTEM });
    // One text block, with the cache breakpoint that lets the next call read it (and the tools) from the cache.
    else expect(fake.requests[0].body.system).toEqual([{ type: 'text', text: SYSTEM, cache_control: { type: 'ephemeral' } }]);
  });

  it('sends a forced tool choice by name, and "required"', async () => {
    await client.complete(req({ toolChoice: { name: 'end_task' } }));
    await client.complete(req({ toolChoice: 'required' }));
    await client.complete(req());
    const [named, required, auto] = fake.requests.map((r) => r.toolChoice);
    if (api === 'openai') {
      expect(named).toEqual({ type: 'function', function: { name: 'end_task' } });
      expect(required).toBe('required');
      expect(auto).toBe('auto');
    } else {
      expect(named).toEqual({ type: 'tool', name: 'end_task' });
      expect(required).toEqual({ type: 'any' });
      expect(auto).toEqual({ type: 'auto' });
    }
  });

  it('reports usage tokens', async () => {
    fake.script({ text: 'ok', usage: { input: 42, output: 7 } });
    const res = await client.complete(req());
    expect(res.usage).toEqual({ input: 42, output: 7 });
  });

  it('reports the input tokens read from and written to the prompt cache, counted in the input', async () => {
    fake.script({ text: 'ok', usage: { input: 1000, output: 7, cacheRead: 800, ...(api === 'anthropic' ? { cacheWrite: 150 } : {}) } });
    const res = await client.complete(req());
    expect(res.usage).toEqual(api === 'anthropic' ? { input: 1000, output: 7, cacheRead: 800, cacheWrite: 150 } : { input: 1000, output: 7, cacheRead: 800 });
  });

  it('maps a 429 to a retryable rate_limited ModelError with retryAfterMs from retry-after', async () => {
    fake.script({ status: 429, text: 'slow down', headers: { 'retry-after': '3' } });
    const err = await caught(() => client.complete(req()));
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ kind: 'rate_limited', retryable: true, status: 429, retryAfterMs: 3000 });
    expect(fake.requests).toHaveLength(1); // the SDK's own retries are off
  });

  it('maps 500 to server (retryable) and 401 to auth (not retryable)', async () => {
    fake.script({ status: 500 }, { status: 401, text: 'bad key' });
    const server = await caught(() => client.complete(req()));
    expect(server).toBeInstanceOf(ModelError);
    expect(server).toMatchObject({ kind: 'server', retryable: true, status: 500 });
    const auth = await caught(() => client.complete(req()));
    expect(auth).toBeInstanceOf(ModelError);
    expect(auth).toMatchObject({ kind: 'auth', retryable: false, status: 401 });
    expect(fake.requests).toHaveLength(2);
  });

  it('maps a destroyed socket to a retryable network ModelError', async () => {
    fake.script({ destroy: true });
    const err = await caught(() => client.complete(req()));
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ kind: 'network', retryable: true });
    expect(err.status).toBeUndefined();
  });

  it('maps a cancelled call to a non-retryable aborted ModelError', async () => {
    fake.script({ hang: true });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const err = await caught(() => client.complete(req({ signal: controller.signal })));
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ kind: 'aborted', retryable: false });
  });

  it('gives up a call that sends nothing for stallMs, before its first byte or mid-stream, as a retryable network error', async () => {
    const stalling = make({ stallMs: 300 });
    for (const reply of [{ hang: true }, { stall: true }]) {
      fake.script(reply);
      const started = Date.now();
      const err = await caught(() => stalling.complete(req()));
      expect(err).toMatchObject({ kind: 'network', retryable: true, message: 'the model sent nothing for 0 s' });
      expect(Date.now() - started).toBeLessThan(3000);
    }
  });

  it('a stream that ends before its end (no stop reason) is a retryable network error, not a short answer', async () => {
    fake.script({ cut: true });
    const err = await caught(() => client.complete(req()));
    expect(err).toMatchObject({ kind: 'network', retryable: true });
    // Anthropic's SDK says so itself when the stream ends early.
    expect(err.message).toMatch(api === 'openai' ? /^the answer stopped before its end$/ : /stream ended/);
  });

  it('keeps a slow stream whose pieces come within stallMs of each other', async () => {
    fake.script({ text: 'one two three four', chunks: 4, chunkDelayMs: 200 });
    const res = await make({ stallMs: 500 }).complete(req());
    expect(res.text).toBe('one two three four');
  });

  it('a cancel during a stall is a cancel, not a stall', async () => {
    fake.script({ hang: true });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const err = await caught(() => make({ stallMs: 100 }).complete(req({ signal: controller.signal })));
    expect(err).toMatchObject({ kind: 'aborted', retryable: false });
  });
});

const history: ChatMessage[] = [
  { role: 'user', content: 'Weather in Paris, and then finish?' },
  {
    role: 'assistant',
    content: '',
    toolCalls: [
      { id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { id: 'call_2', name: 'end_task', arguments: '{}' },
    ],
  },
  { role: 'tool', toolCallId: 'call_1', name: 'get_weather', content: 'sunny, 21C' },
  { role: 'tool', toolCallId: 'call_2', name: 'end_task', content: 'done' },
  { role: 'assistant', content: 'It is sunny.' },
  { role: 'user', content: 'Thanks!' },
];

describe('multi-turn history in the wire format', () => {
  it('openai: assistant tool_calls and role "tool" messages', async () => {
    await createOpenAiClient({ baseUrl: fake.openaiBaseUrl, apiKey: 'test' }).complete(req({ messages: history }));
    expect(fake.requests[0].body.messages).toEqual([
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Weather in Paris, and then finish?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'end_task', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21C' },
      { role: 'tool', tool_call_id: 'call_2', content: 'done' },
      { role: 'assistant', content: 'It is sunny.' },
      { role: 'user', content: 'Thanks!' },
    ]);
    expect(fake.requests[0].lastUserText).toBe('Thanks!');
  });

  it('anthropic: tool_use and tool_result blocks, tool results joined into one user turn', async () => {
    await createAnthropicClient({ baseUrl: fake.anthropicBaseUrl, apiKey: 'test' }).complete(req({ messages: history }));
    expect(fake.requests[0].body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris, and then finish?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'call_2', name: 'end_task', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: 'sunny, 21C' },
          { type: 'tool_result', tool_use_id: 'call_2', content: 'done' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'It is sunny.' }] },
      { role: 'user', content: [{ type: 'text', text: 'Thanks!' }] },
    ]);
  });

  it('anthropic: a cache breakpoint on the last message the previous request began with, none on the new input', async () => {
    // The first five messages were in the previous request: the breakpoint is on the end_task result, the last of them.
    await createAnthropicClient({ baseUrl: fake.anthropicBaseUrl, apiKey: 'test' }).complete(req({ messages: history, stablePrefix: 4 }));
    const sent: { role: string; content: { type: string; cache_control?: unknown }[] }[] = fake.requests[0].body.messages;
    const marked = sent.flatMap((m, i) => m.content.flatMap((b, j) => (b.cache_control ? [[i, j, b.type]] : [])));
    expect(marked).toEqual([[2, 1, 'tool_result']]);
    expect(sent[2].content[1].cache_control).toEqual({ type: 'ephemeral' });
  });

  it('anthropic: a breakpoint on a stable user message joined with the new one marks only the stable block', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: '[Parlor] Summary of the earlier conversation: they talked about cats.' },
      { role: 'user', content: 'and dogs?' },
    ];
    await createAnthropicClient({ baseUrl: fake.anthropicBaseUrl, apiKey: 'test' }).complete(req({ messages, stablePrefix: 1 }));
    expect(fake.requests[0].body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: messages[0].content, cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'and dogs?' },
        ],
      },
    ]);
  });

  it('anthropic: roles always alternate and start with user', async () => {
    const messy: ChatMessage[] = [
      { role: 'assistant', content: 'Good morning! (scheduled)' },
      { role: 'user', content: 'hi' },
      { role: 'user', content: 'are you there?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'get_weather', arguments: '{"city":"Oslo"}' }] },
      { role: 'tool', toolCallId: 't1', name: 'get_weather', content: 'snow' },
      { role: 'user', content: 'and?' },
    ];
    await createAnthropicClient({ baseUrl: fake.anthropicBaseUrl, apiKey: 'test' }).complete(req({ messages: messy }));
    const sent: { role: string; content: { type: string }[] }[] = fake.requests[0].body.messages;
    expect(sent[0].role).toBe('user');
    sent.forEach((m, i) => {
      if (i > 0) expect(m.role, `message ${i}`).not.toBe(sent[i - 1].role);
    });
    // The tool_result comes first in the user turn that follows the tool_use.
    const afterToolUse = sent.findIndex((m) => m.content.some((b) => b.type === 'tool_use')) + 1;
    expect(sent[afterToolUse].content.map((b) => b.type)).toEqual(['tool_result', 'text']);
  });
});

describe('openai: malformed tool-call JSON', () => {
  it('comes back as the raw string in arguments', async () => {
    fake.script({ toolCalls: [{ id: 'bad', name: 'get_weather', arguments: '{"city": "Par' }] });
    const res = await createOpenAiClient({ baseUrl: fake.openaiBaseUrl, apiKey: 'test' }).complete(req());
    expect(res.toolCalls).toEqual([{ id: 'bad', name: 'get_weather', arguments: '{"city": "Par' }]);
  });
});

describe('withModelRetries', () => {
  const retrying = (deadlineMs = 10_000) =>
    withModelRetries(createOpenAiClient({ baseUrl: fake.openaiBaseUrl, apiKey: 'test' }), { deadlineMs, minDelayMs: 10 });

  it('retries a 429 once and returns the one successful result', async () => {
    fake.script({ status: 429 }, { text: 'finally' });
    const retries: number[] = [];
    const client = withModelRetries(createOpenAiClient({ baseUrl: fake.openaiBaseUrl, apiKey: 'test' }), {
      deadlineMs: 10_000, minDelayMs: 10, onRetry: (_e, attempt) => retries.push(attempt),
    });
    const res = await client.complete(req());
    expect(res.text).toBe('finally');
    expect(fake.requests).toHaveLength(2);
    expect(retries).toEqual([1]);
    expect(client.provider).toBe('openai');
  });

  it('retries 503 twice, then succeeds (anthropic too)', async () => {
    fake.script({ status: 503 }, { status: 503 }, { text: 'third time' });
    const client = withModelRetries(createAnthropicClient({ baseUrl: fake.anthropicBaseUrl, apiKey: 'test' }), { deadlineMs: 10_000, minDelayMs: 10 });
    const res = await client.complete(req());
    expect(res.text).toBe('third time');
    expect(fake.requests).toHaveLength(3);
  });

  it('retries a stalled stream and returns the next answer once', async () => {
    fake.script({ stall: true }, { text: 'after the stall' });
    const client = withModelRetries(createOpenAiClient({ baseUrl: fake.openaiBaseUrl, apiKey: 'test', stallMs: 300 }), { deadlineMs: 10_000, minDelayMs: 10 });
    const res = await client.complete(req());
    expect(res.text).toBe('after the stall');
    expect(fake.requests).toHaveLength(2);
  });

  it('does not retry a 400', async () => {
    fake.script({ status: 400, text: 'bad tool schema' }, { text: 'should not be reached' });
    const err = await caught(() => retrying().complete(req()));
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ kind: 'request', retryable: false, status: 400 });
    expect(err.message).toContain('bad tool schema');
    expect(fake.requests).toHaveLength(1);
  });

  it('stops at the deadline and throws the last ModelError', async () => {
    let n = 0;
    fake.setDefault(() => ({ status: 500, text: `failure #${++n}` }));
    const started = Date.now();
    const err = await caught(() => retrying(400).complete(req()));
    const elapsed = Date.now() - started;
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ kind: 'server', status: 500 });
    expect(fake.requests.length).toBeGreaterThanOrEqual(2);
    expect(err.message).toContain(`failure #${fake.requests.length}`);
    expect(elapsed).toBeLessThan(400 + 1_000);
  });

  it('honours retry-after: 1', async () => {
    fake.script({ status: 429, headers: { 'retry-after': '1' } }, { text: 'after the wait' });
    const started = Date.now();
    const res = await retrying().complete(req());
    expect(res.text).toBe('after the wait');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(fake.requests).toHaveLength(2);
  });

  it('gives up at once when retry-after is beyond the deadline', async () => {
    fake.script({ status: 429, headers: { 'retry-after': '30' } }, { text: 'too late' });
    const started = Date.now();
    const err = await caught(() => retrying(2_000).complete(req()));
    expect(err).toMatchObject({ kind: 'rate_limited', retryAfterMs: 30_000 });
    expect(fake.requests).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});

describe('withRetries', () => {
  const retryable = (message: string, retryAfterMs?: number) =>
    Object.assign(new Error(message), { retryable: true, retryAfterMs });

  it('passes the attempt number and returns the first success', async () => {
    const attempts: number[] = [];
    const result = await withRetries(async (attempt) => {
      attempts.push(attempt);
      if (attempt < 3) throw retryable(`try ${attempt}`);
      return 'ok';
    }, { deadlineMs: 5_000, minDelayMs: 5 });
    expect(result).toBe('ok');
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('rethrows a non-retryable error as is, after one attempt', async () => {
    const boom = new Error('boom');
    let calls = 0;
    await expect(withRetries(async () => { calls++; throw boom; }, { deadlineMs: 5_000, minDelayMs: 5 })).rejects.toBe(boom);
    expect(calls).toBe(1);
  });

  it('stops after `retries` and throws the last error', async () => {
    let calls = 0;
    const err = await withRetries(async () => { throw retryable(`fail ${++calls}`); }, { deadlineMs: 60_000, minDelayMs: 1, retries: 2 })
      .catch((e: Error) => e);
    expect(calls).toBe(3);
    expect((err as Error).message).toBe('fail 3');
  });

  it('stops at the deadline', async () => {
    let calls = 0;
    const started = Date.now();
    const err = await withRetries(async () => { throw retryable(`fail ${++calls}`); }, { deadlineMs: 200, minDelayMs: 20, retries: 100 })
      .catch((e: Error) => e);
    expect((err as Error).message).toBe(`fail ${calls}`);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(Date.now() - started).toBeLessThan(200 + 500);
  });

  it('waits the delay an error asks for', async () => {
    let calls = 0;
    const delays: number[] = [];
    const started = Date.now();
    await withRetries(async () => {
      if (++calls === 1) throw retryable('wait please', 300);
      return 'done';
    }, { deadlineMs: 5_000, minDelayMs: 5, onRetry: (_e, _a, ms) => delays.push(ms) });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(delays).toEqual([300]);
  });

  it('does not retry once the signal is aborted', async () => {
    const controller = new AbortController();
    let calls = 0;
    const err = await withRetries(async () => {
      calls++;
      controller.abort();
      throw retryable('cancelled meanwhile');
    }, { deadlineMs: 5_000, minDelayMs: 5, signal: controller.signal }).catch((e: Error) => e);
    expect(calls).toBe(1);
    expect((err as Error).message).toBe('cancelled meanwhile');
  });
});

describe('withRetries honours its deadline', () => {
  const retryable = (message: string) => Object.assign(new Error(message), { retryable: true });

  it('keeps retrying until the deadline, not a fixed number of attempts, and reports the delays it really waits', async () => {
    let calls = 0;
    const delays: number[] = [];
    const waits: number[] = [];
    let last = Date.now();
    const started = Date.now();
    const err = await withRetries(
      async () => {
        calls++;
        waits.push(Date.now() - last);
        throw retryable(`fail ${calls}`);
      },
      { deadlineMs: 2_500, minDelayMs: 20, maxDelayMs: 80, onRetry: (_e, _a, ms) => { delays.push(ms); last = Date.now(); } },
    ).catch((e: Error) => e);
    const elapsed = Date.now() - started;
    // Six attempts used to be the end of it whatever the deadline; with 80 ms waits, 2.5 s holds many more.
    expect(calls).toBeGreaterThan(15);
    expect((err as Error).message).toBe(`fail ${calls}`);
    expect(elapsed).toBeGreaterThan(2_300);
    expect(elapsed).toBeLessThan(2_500 + 500);
    // Each reported delay is capped (with jitter) and matches the wait that followed it.
    expect(Math.max(...delays)).toBeLessThanOrEqual(100);
    for (const [i, delay] of delays.entries()) expect(waits[i + 1]).toBeGreaterThanOrEqual(delay - 5);
  });
});
