// Proves the fake LLM server against the real OpenAI and Anthropic SDKs, so tests that
// rely on it exercise the same parsing paths as production.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from './fake-llm.ts';

let fake: FakeLlm;
let openai: OpenAI;
let anthropic: Anthropic;

beforeEach(async () => {
  fake = await startFakeLlm();
  openai = new OpenAI({ apiKey: 'x', baseURL: fake.openaiBaseUrl, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'x', baseURL: fake.anthropicBaseUrl, maxRetries: 0 });
});
afterEach(async () => {
  await fake.close();
});

const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};
const anthropicWeatherTool = { name: 'get_weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } };

describe('fake-llm: OpenAI chat completions', () => {
  it('streams text in several chunks, with a finish chunk and a usage chunk', async () => {
    fake.script({ text: 'Hello there, streaming world', usage: { input: 11, output: 7 } });
    const stream = await openai.chat.completions.create({
      model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let contentChunks = 0;
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) { text += choice.delta.content; contentChunks++; }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('Hello there, streaming world');
    expect(contentChunks).toBeGreaterThan(1);
    expect(finish).toBe('stop');
    expect(usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    expect(fake.requests[0]).toMatchObject({ api: 'openai', path: '/v1/chat/completions', stream: true, model: 'gpt-test' });
  });

  it('streams tool calls as indexed deltas that accumulate to name + JSON args', async () => {
    fake.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo', days: 3 } }, { id: 'call_fixed', name: 'noop', arguments: '{}' }] });
    const stream = await openai.chat.completions.create({
      model: 'gpt-test', messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool], stream: true,
    });
    const calls: Array<{ id: string; name: string; args: string }> = [];
    let argDeltas = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const d of choice?.delta.tool_calls ?? []) {
        calls[d.index] ??= { id: '', name: '', args: '' };
        if (d.id) calls[d.index].id = d.id;
        if (d.function?.name) calls[d.index].name += d.function.name;
        if (d.function?.arguments) { calls[d.index].args += d.function.arguments; argDeltas++; }
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    expect(finish).toBe('tool_calls');
    expect(calls).toHaveLength(2);
    expect(calls[0].id).toMatch(/^call_\w+/);
    expect(calls[0].name).toBe('get_weather');
    expect(JSON.parse(calls[0].args)).toEqual({ city: 'Oslo', days: 3 });
    expect(calls[1]).toEqual({ id: 'call_fixed', name: 'noop', args: '{}' });
    expect(argDeltas).toBeGreaterThan(2); // arguments really were split
  });

  it("satisfies the SDK's stream helper (finalChatCompletion validates the chunk sequence)", async () => {
    fake.script({ text: 'Let me check.', toolCalls: [{ name: 'get_weather', arguments: { city: 'Bergen' } }] });
    const final = await openai.chat.completions
      .stream({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }], tools: [weatherTool] })
      .finalChatCompletion();
    const msg = final.choices[0].message;
    expect(msg.content).toBe('Let me check.');
    const call = msg.tool_calls?.[0];
    expect(call?.type === 'function' && call.function.name).toBe('get_weather');
    expect(call?.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ city: 'Bergen' });
    expect(final.choices[0].finish_reason).toBe('tool_calls');
  });

  it('answers non-streaming with text, tool calls (malformed args verbatim) and usage', async () => {
    fake.script({ text: 'plain answer' }, { toolCalls: [{ name: 'get_weather', arguments: '{"city": "Os' }] });
    const a = await openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'q1' }] });
    expect(a.object).toBe('chat.completion');
    expect(a.choices[0].message.content).toBe('plain answer');
    expect(a.choices[0].finish_reason).toBe('stop');
    expect(a.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(a.usage?.completion_tokens).toBeGreaterThan(0);

    const b = await openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'q2' }], tools: [weatherTool] });
    const call = b.choices[0].message.tool_calls?.[0];
    expect(b.choices[0].finish_reason).toBe('tool_calls');
    expect(b.choices[0].message.content).toBeNull();
    expect(call?.id).toMatch(/^call_/);
    expect(call?.type === 'function' && call.function.arguments).toBe('{"city": "Os');
  });

  it('surfaces a scripted 429 as RateLimitError with headers and OpenAI error body', async () => {
    fake.script({ status: 429, text: 'slow down', headers: { 'retry-after': '0' } });
    const err = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const e = err as InstanceType<typeof OpenAI.RateLimitError>;
    expect(e.status).toBe(429);
    expect(e.message).toContain('slow down');
    expect(e.headers.get('retry-after')).toBe('0');
    expect(e.error).toMatchObject({ message: 'slow down', code: 'rate_limit_exceeded' });
  });

  it('maps 500 and 400 to the matching SDK error classes, also for streaming requests', async () => {
    fake.script({ status: 500 }, { status: 400, text: 'bad tool schema' });
    await expect(openai.chat.completions.create({ model: 'm', messages: [], stream: true })).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    await expect(openai.chat.completions.create({ model: 'm', messages: [] })).rejects.toMatchObject({ status: 400, message: expect.stringContaining('bad tool schema') });
  });

  it('serves GET /v1/models for health checks', async () => {
    const page = await openai.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['fake-model']);
    expect(fake.requests).toHaveLength(0); // health checks are not recorded
  });
});

describe('fake-llm: Anthropic messages', () => {
  it('streams text through the SDK stream helper and raw events', async () => {
    fake.script({ text: 'Hello from the fake Claude' }, { text: 'again' });
    const deltas: string[] = [];
    const stream = anthropic.messages.stream({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    stream.on('text', (t) => deltas.push(t));
    const final = await stream.finalMessage();
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('Hello from the fake Claude');
    expect(final.content).toEqual([{ type: 'text', text: 'Hello from the fake Claude' }]);
    expect(final.stop_reason).toBe('end_turn');
    expect(final.usage.input_tokens).toBeGreaterThan(0);
    expect(final.usage.output_tokens).toBeGreaterThan(0);

    const raw = await anthropic.messages.create({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], stream: true });
    const types: string[] = [];
    for await (const ev of raw) types.push(ev.type);
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    expect(types).toContain('content_block_delta');
  });

  it('streams tool_use with input_json_delta pieces that parse to the input', async () => {
    fake.script({ text: 'Checking.', toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const stream = anthropic.messages.stream({
      model: 'claude-test', max_tokens: 100, tools: [anthropicWeatherTool], messages: [{ role: 'user', content: 'weather?' }],
    });
    const partials: string[] = [];
    stream.on('inputJson', (p) => partials.push(p));
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    expect(partials.length).toBeGreaterThan(1);
    const [text, tool] = final.content;
    expect(text).toEqual({ type: 'text', text: 'Checking.' });
    expect(tool.type).toBe('tool_use');
    if (tool.type !== 'tool_use') return;
    expect(tool.id).toMatch(/^toolu_/);
    expect(tool.name).toBe('get_weather');
    expect(tool.input).toEqual({ city: 'Oslo' });
  });

  it('streams malformed tool JSON verbatim as partial_json', async () => {
    fake.script({ toolCalls: [{ id: 'toolu_bad', name: 'get_weather', arguments: '{"city": "Os' }] });
    const raw = await anthropic.messages.create({ model: 'c', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], stream: true });
    let json = '';
    for await (const ev of raw) if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') json += ev.delta.partial_json;
    expect(json).toBe('{"city": "Os');
  });

  it('answers non-streaming with text + tool_use (malformed string args become {})', async () => {
    fake.script(
      { text: 'Sure.', toolCalls: [{ id: 'toolu_1', name: 'get_weather', arguments: { city: 'Oslo' } }], usage: { input: 5, output: 9 } },
      { toolCalls: [{ name: 'get_weather', arguments: 'not json' }] },
    );
    const a = await anthropic.messages.create({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'x' }] });
    expect(a).toMatchObject({
      type: 'message', role: 'assistant', model: 'claude-test', stop_reason: 'tool_use', stop_sequence: null,
      content: [{ type: 'text', text: 'Sure.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }],
      usage: { input_tokens: 5, output_tokens: 9 },
    });
    const b = await anthropic.messages.create({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'x' }] });
    expect(b.content).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'get_weather', input: {} }]);
  });

  it('surfaces a scripted 429 as RateLimitError with the Anthropic error body', async () => {
    fake.script({ status: 429, text: 'rate limited', headers: { 'retry-after': '0' } }, { status: 529 });
    const err = await anthropic.messages.create({ model: 'c', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect(e.status).toBe(429);
    expect(e.headers?.get('retry-after')).toBe('0');
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error', message: 'rate limited' } });

    const overloaded = await anthropic.messages.create({ model: 'c', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], stream: true }).catch((x: unknown) => x);
    expect(overloaded).toBeInstanceOf(Anthropic.APIError);
    expect(overloaded).toMatchObject({ status: 529, error: { error: { type: 'overloaded_error' } } });
  });
});

describe('fake-llm: scripting, recording and lifecycle', () => {
  it('passes the recorded request to a handler (OpenAI: system, tools, trailing tool message)', async () => {
    let seen: RecordedRequest | undefined;
    fake.script((req) => { seen = req; return { text: `you said ${req.lastUserText}` }; });
    const r = await openai.chat.completions.create({
      model: 'gpt-test',
      tools: [weatherTool],
      tool_choice: 'auto',
      messages: [
        { role: 'system', content: 'You are Parlor.' },
        { role: 'user', content: [{ type: 'text', text: 'weather in' }, { type: 'text', text: 'Oslo?' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      ],
    });
    expect(r.choices[0].message.content).toBe('you said weather in\nOslo?');
    expect(seen).toMatchObject({
      api: 'openai', system: 'You are Parlor.', lastUserText: 'weather in\nOslo?', toolNames: ['get_weather'], toolChoice: 'auto', stream: false,
    });
    expect(seen?.headers.authorization).toBe('Bearer x');
  });

  it('passes the recorded request to a handler (Anthropic: system blocks, tool_result turn)', async () => {
    const handler = async (req: RecordedRequest) => ({ text: `${req.system} | ${req.lastUserText} | ${req.toolNames.join(',')}` });
    fake.script(handler);
    const r = await anthropic.messages.create({
      model: 'claude-test', max_tokens: 100,
      system: [{ type: 'text', text: 'Be brief.' }],
      tools: [anthropicWeatherTool],
      tool_choice: { type: 'any' },
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
      ],
    });
    expect(r.content).toEqual([{ type: 'text', text: 'Be brief. | weather? | get_weather' }]);
    expect(fake.requests[0]).toMatchObject({ api: 'anthropic', path: '/v1/messages', toolChoice: { type: 'any' } });
    // SDK 1.x sends the key as a bearer token; older ones used x-api-key. Accept either.
    const h = fake.requests[0].headers;
    expect(h['x-api-key'] ?? h.authorization).toMatch(/^(Bearer )?x$/);
    expect(h['anthropic-version']).toBeTruthy();
  });

  it('echoes by default, honours setDefault, and reset() restores the echo', async () => {
    const ask = async (content: string) =>
      (await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content }] })).choices[0].message.content;
    expect(await ask('ping')).toBe('echo: ping');
    const a = await anthropic.messages.create({ model: 'c', max_tokens: 10, messages: [{ role: 'user', content: 'pong' }] });
    expect(a.content).toEqual([{ type: 'text', text: 'echo: pong' }]);

    fake.setDefault(() => ({ text: 'custom' }));
    fake.script({ text: 'queued first' });
    expect(await ask('a')).toBe('queued first');
    expect(await ask('b')).toBe('custom');
    expect(fake.requests).toHaveLength(4);

    fake.script({ text: 'dropped by reset' });
    fake.reset();
    expect(fake.requests).toHaveLength(0);
    expect(await ask('c')).toBe('echo: c');
  });

  it('waitForRequests resolves once enough requests arrived, and times out with a clear error', async () => {
    fake.script({ text: 'slow', delayMs: 50 });
    const waiting = fake.waitForRequests(1);
    const answer = openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'first' }] });
    const [req] = await waiting;
    expect(req.lastUserText).toBe('first');
    expect((await answer).choices[0].message.content).toBe('slow');
    await expect(fake.waitForRequests(2, 50)).rejects.toThrow(/timed out after 50ms waiting for 2 request\(s\); got 1/);
  });

  it('close() ends a hanging request, and a client abort of a hanging request works too', async () => {
    fake.script({ hang: true }, { hang: true });
    const ac = new AbortController();
    const aborted = anthropic.messages.create({ model: 'c', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, { signal: ac.signal }).catch((e: unknown) => e);
    await fake.waitForRequests(1);
    ac.abort();
    expect(await aborted).toBeInstanceOf(Anthropic.APIUserAbortError);

    const hanging = openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }).catch((e: unknown) => e);
    await fake.waitForRequests(2);
    const t0 = Date.now();
    await fake.close();
    expect(await hanging).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('destroy simulates a network error', async () => {
    fake.script({ destroy: true }, { destroy: true });
    await expect(openai.chat.completions.create({ model: 'm', messages: [] })).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
    await expect(anthropic.messages.create({ model: 'c', max_tokens: 1, messages: [] })).rejects.toBeInstanceOf(Anthropic.APIConnectionError);
  });
});
