import { describe, it, expect } from 'vitest';
import { DEFAULT_HISTORY_BUDGET, messageSize } from '#src/agent/history.ts';
import { runAgentLoop, type LoopEvent, type LoopOptions } from '#src/agent/loop.ts';
import { ModelError, type ChatMessage, type ModelClient, type ModelRequest, type ModelResponse } from '#src/llm/types.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import type { Tool } from '#src/tools/types.ts';
import { createEndTaskTool } from '../../tools/end-task.ts';
import { createThinkHarderTool } from '../../tools/think-harder.ts';
import { createClockTool } from '../../tools/clock.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

type Step = ModelResponse | Error | ((request: ModelRequest) => Promise<ModelResponse>);
type Recorded = Omit<ModelRequest, 'messages' | 'signal'> & { messages: ChatMessage[] };

/** A ModelClient that answers from a script and records a snapshot of every request. */
class ScriptedModel implements ModelClient {
  readonly provider = 'scripted';
  readonly requests: Recorded[] = [];
  constructor(private readonly steps: Step[]) {}
  async complete(request: ModelRequest): Promise<ModelResponse> {
    const { signal: _signal, ...rest } = request;
    this.requests.push({ ...structuredClone(rest) });
    const step = this.steps.shift();
    if (!step) throw new Error('scripted model: no more responses');
    if (step instanceof Error) throw step;
    return typeof step === 'function' ? step(request) : step;
  }
}

let nextId = 0;
const say = (text: string): ModelResponse => ({ text, toolCalls: [], usage: { input: 10, output: 5 }, stopReason: 'end_turn' });
const use = (...calls: [name: string, args?: unknown][]): ModelResponse => ({
  text: '',
  toolCalls: calls.map(([name, args]) => ({ id: `call_${++nextId}`, name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) })),
  usage: { input: 10, output: 5 },
  stopReason: 'tool_use',
});
const withText = (text: string, response: ModelResponse): ModelResponse => ({ ...response, text });

const open = { type: 'object', properties: {} };
function counterTool(name: string, extra: Partial<Tool> = {}) {
  const runs: unknown[] = [];
  const tool: Tool = { name, description: name, parameters: open, async run(args) { runs.push(args); return `${name} result ${runs.length}`; }, ...extra };
  return { tool, runs };
}

/** Wires a real ToolRunner (test tools + real built-ins) into the loop, as turn-runner.ts does. */
function setup(steps: Step[], testTools: Tool[] = [], options: Partial<LoopOptions> & { signal?: AbortSignal } = {}) {
  const model = new ScriptedModel(steps);
  const builtins = [createEndTaskTool(), createThinkHarderTool(), createClockTool({ timezone: 'UTC' })];
  const runner = new ToolRunner([...builtins, ...testTools]);
  const persona = makePersona();
  const offered = runner.toolsFor(persona, options.background ? 'cron' : 'user');
  const ctx = makeToolContext({ persona, kind: options.background ? 'cron' : 'user', signal: options.signal });
  const messages: ChatMessage[] = [{ role: 'user', content: 'hello bot' }];
  const events: LoopEvent[] = [];
  const run = () =>
    runAgentLoop({
      model,
      modelName: 'test-model',
      system: 'You are a test.',
      messages,
      tools: { specs: runner.specs(offered), list: offered, execute: (call) => runner.execute(call, offered, ctx) },
      background: false,
      onEvent: (e) => void events.push(e),
      ...options,
    });
  return { model, messages, events, run, offeredNames: offered.map((t) => t.name) };
}
const toolMessages = (messages: ChatMessage[]) => messages.filter((m): m is Extract<ChatMessage, { role: 'tool' }> => m.role === 'tool');

describe('runAgentLoop: replies and tools', () => {
  it('a plain answer ends the turn ok with that text as the reply', async () => {
    const { model, run } = setup([say('Hi! How can I help?')]);
    const result = await run();
    expect(result).toMatchObject({ status: 'ok', reply: 'Hi! How can I help?', modelCalls: 1, usage: { input: 10, output: 5 } });
    expect(model.requests[0]).toMatchObject({ model: 'test-model', system: 'You are a test.', toolChoice: 'auto', thinking: false });
    expect(model.requests[0].messages).toEqual([{ role: 'user', content: 'hello bot' }]);
  });

  it('runs several calls of one message concurrently and returns results in call order', async () => {
    let active = 0;
    let maxActive = 0;
    const finished: string[] = [];
    const slowTool = (name: string, ms: number): Tool => ({
      name, description: name, parameters: open,
      async run() {
        active++;
        maxActive = Math.max(maxActive, active);
        await sleep(ms);
        active--;
        finished.push(name);
        return `${name} done`;
      },
    });
    const { model, messages, run } = setup(
      [use(['slow_a'], ['slow_b'], ['slow_c']), say('All three done.')],
      [slowTool('slow_a', 120), slowTool('slow_b', 10), slowTool('slow_c', 60)],
    );
    const result = await run();
    expect(result).toMatchObject({ status: 'ok', reply: 'All three done.' });
    expect(maxActive).toBe(3); // all three were running at once
    expect(finished).toEqual(['slow_b', 'slow_c', 'slow_a']); // sequential would finish a, b, c
    const assistant = messages[1] as Extract<ChatMessage, { role: 'assistant' }>;
    expect(toolMessages(messages).map((m) => [m.toolCallId, m.content])).toEqual(assistant.toolCalls!.map((c) => [c.id, `${c.name} done`]));
    const second = model.requests[1].messages;
    expect(second.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'tool']);
  });

  it('sends the tool list on every model call', async () => {
    const { tool } = counterTool('lookup');
    const { model, run, offeredNames } = setup([use(['lookup', { q: 1 }]), use(['clock']), say('done')], [tool]);
    await run();
    expect(model.requests).toHaveLength(3);
    expect(offeredNames).toEqual(['end_task', 'think_harder', 'clock', 'lookup']);
    for (const request of model.requests) expect(request.tools.map((t) => t.name)).toEqual(offeredNames);
    expect(model.requests[0].tools.find((t) => t.name === 'end_task')?.parameters).toMatchObject({ required: ['status'] });
  });

  it('end_task ends the turn with its status, without another model call', async () => {
    const { model, run } = setup([withText('I could not find that file.', use(['end_task', { status: 'failed', summary: 'no file' }])), say('never')]);
    const result = await run();
    expect(result).toMatchObject({ status: 'failed', summary: 'no file', reply: 'I could not find that file.', modelCalls: 1 });
    expect(model.requests).toHaveLength(1);
  });

  it('think_harder switches thinking on for the following calls', async () => {
    const { model, run } = setup([use(['think_harder', { reason: 'hard' }]), use(['clock']), say('42')]);
    const result = await run();
    expect(result.reply).toBe('42');
    expect(model.requests.map((r) => r.thinking)).toEqual([false, true, true]);
  });
});

describe('runAgentLoop: limits', () => {
  it('stops at the iteration cap with status failed and a note the user can see', async () => {
    const { tool, runs } = counterTool('step');
    const steps = Array.from({ length: 10 }, (_, i) => use(['step', { i }]));
    const { model, run } = setup(steps, [tool], { maxIterations: 3 });
    const result = await run();
    expect(result.status).toBe('failed');
    expect(result.reply).toBe('I stopped after 3 steps without finishing. Say "continue" if you want me to go on.');
    expect(model.requests).toHaveLength(3);
    expect(runs).toHaveLength(3);
  });

  it('stops with failed when the deadline has passed, before calling the model', async () => {
    const { model, run } = setup([say('too late')], [], { deadline: Date.now() - 1 });
    const result = await run();
    expect(result).toMatchObject({ status: 'failed', modelCalls: 0 });
    expect(result.reply).toMatch(/ran out of time/);
    expect(model.requests).toHaveLength(0);
  });

  it('stops with failed at the next boundary when a tool runs past the deadline', async () => {
    const slow: Tool = { name: 'slow', description: '', parameters: open, run: async () => { await sleep(80); return 'ok'; } };
    const options: Partial<LoopOptions> = {};
    const { model, run } = setup([use(['slow']), say('never')], [slow], options);
    options.deadline = Date.now() + 40; // set after setup: compiling the tool schemas takes time
    const result = await run();
    expect(result.status).toBe('failed');
    expect(result.reply).toMatch(/ran out of time/);
    expect(model.requests).toHaveLength(1);
  });
});

describe('runAgentLoop: repeated calls', () => {
  it('a second identical call turns thinking on; a third is blocked without running', async () => {
    const { tool, runs } = counterTool('search');
    const { model, messages, run } = setup(
      [use(['search', '{"q":"cats","page":1}']), use(['search', '{"page":1,"q":"cats"}']), use(['search', { q: 'cats', page: 1 }]), say('Here is what I found.')],
      [tool],
    );
    const result = await run();
    expect(result).toMatchObject({ status: 'ok', reply: 'Here is what I found.' });
    expect(runs).toHaveLength(2);
    expect(model.requests.map((r) => r.thinking)).toEqual([false, false, true, true]);
    const results = toolMessages(messages).map((m) => m.content);
    expect(results[0]).toBe('search result 1');
    expect(results[1]).toMatch(/^search result 2\n\[Parlor\] You made this exact search call twice in a row/);
    expect(results[2]).toMatch(/^blocked: this is the third identical search call in a row; it was not run/);
  });

  it('a different call in between resets the count', async () => {
    const { tool, runs } = counterTool('search');
    const { run, messages } = setup(
      [use(['search', { q: 'a' }]), use(['search', { q: 'a' }]), use(['search', { q: 'b' }]), use(['search', { q: 'a' }]), say('ok')],
      [tool],
    );
    await run();
    expect(runs).toHaveLength(4);
    expect(toolMessages(messages).some((m) => m.content.startsWith('blocked:'))).toBe(false);
  });

  it('a tool with allowRepeat is exempt', async () => {
    const { tool, runs } = counterTool('poll', { allowRepeat: true });
    const { model, messages, run } = setup([use(['poll']), use(['poll']), use(['poll']), use(['poll']), say('job finished')], [tool]);
    const result = await run();
    expect(result.reply).toBe('job finished');
    expect(runs).toHaveLength(4);
    expect(toolMessages(messages).map((m) => m.content)).toEqual(['poll result 1', 'poll result 2', 'poll result 3', 'poll result 4']);
    expect(model.requests.every((r) => r.thinking === false)).toBe(true);
  });
});

describe('runAgentLoop: background turns', () => {
  it('plain text gets exactly one forced end_task follow-up and produces no reply', async () => {
    const { model, messages, run } = setup([say('Nothing happened today.'), withText('hmm', use(['end_task', { status: 'skipped' }]))], [], { background: true });
    const result = await run();
    expect(result.status).toBe('skipped');
    expect(result.reply).toBeUndefined();
    expect(model.requests.map((r) => r.toolChoice)).toEqual(['auto', { name: 'end_task' }]);
    expect(messages.some((m) => m.role === 'user' && m.content.includes('Call end_task now'))).toBe(true);
  });

  it('a second plain text after the forced follow-up ends ok without a third call', async () => {
    const { model, run } = setup([say('first'), say('second'), say('third')], [], { background: true });
    const result = await run();
    expect(result).toMatchObject({ status: 'ok', modelCalls: 2 });
    expect(result.reply).toBeUndefined();
    expect(model.requests).toHaveLength(2);
  });

  it('end_task skipped ends a background turn as skipped with no reply', async () => {
    const { model, run } = setup([withText('HEARTBEAT_OK', use(['end_task', { status: 'skipped', summary: 'quiet' }]))], [], { background: true });
    const result = await run();
    expect(result).toMatchObject({ status: 'skipped', summary: 'quiet', modelCalls: 1 });
    expect(result.reply).toBeUndefined();
    expect(model.requests[0].toolChoice).toBe('auto');
  });
});

describe('runAgentLoop: what the user sees', () => {
  it.each([
    ['<think>The user wants X. Secret plan.</think>Here you go.', 'Here you go.'],
    ['<thinking>\nstep 1\n</thinking>\n\nAnswer: 4', 'Answer: 4'],
    ['Sure.<reasoning>hidden</reasoning> Done.', 'Sure. Done.'],
    ['Start of answer <think>never closed, half a thought', 'Start of answer'],
    ['leftover thought</think>Visible part', 'Visible part'],
  ])('strips reasoning from %j', async (text, expected) => {
    const { run } = setup([say(text)]);
    const result = await run();
    expect(result.reply).toBe(expected);
  });

  it.each(['HEARTBEAT_OK', '  heartbeat_ok \n', 'NO_REPLY', '<think>nothing to do</think>\nHEARTBEAT_OK'])('never shows the marker in %j', async (text) => {
    const { run } = setup([say(text)]);
    const result = await run();
    expect(result.status).toBe('ok');
    expect(result.reply ?? '').toBe('');
  });

  it.each(['Nothing new since this morning.\nHEARTBEAT_OK', 'HEARTBEAT_OK\n\nNothing new since this morning.'])(
    'never shows the marker when it comes with other text (%j)',
    async (text) => {
      const { run } = setup([say(text)]);
      const result = await run();
      expect(result.reply).toContain('Nothing new since this morning.');
      expect(result.reply).not.toContain('HEARTBEAT_OK');
    },
  );

  it('strips reasoning from the text that accompanies end_task', async () => {
    const { run } = setup([withText('<think>they asked twice</think>All set!', use(['end_task', { status: 'ok' }]))]);
    expect((await run()).reply).toBe('All set!');
  });

  it('a ModelError ends the turn failed with a short apology and no internals', async () => {
    const error = new ModelError({ message: '429 {"type":"error","error":{"type":"rate_limit_error","message":"org-abc123 exceeded"}}', status: 429, kind: 'rate_limited' });
    const { run } = setup([error]);
    const result = await run();
    expect(result.status).toBe('failed');
    expect(result.reply).toBe('Sorry, the model is rate-limiting me right now. Please try again in a minute.');
    expect(result.error).toContain('429');
  });

  it.each([
    new ModelError({ message: 'Incorrect API key provided: sk-abc', status: 401, kind: 'auth' }),
    new ModelError({ message: 'fetch failed ECONNRESET', kind: 'network' }),
    new ModelError({ message: 'max_tokens: too large', status: 400, kind: 'request' }),
    new TypeError("Cannot read properties of undefined (reading 'choices')"),
  ])('keeps error internals out of the reply (%s)', async (error) => {
    const { run } = setup([error]);
    const result = await run();
    expect(result.status).toBe('failed');
    expect(result.reply).toMatch(/^Sorry, /);
    expect(result.reply!.length).toBeLessThan(120);
    for (const internal of [error.message, 'sk-abc', 'ECONNRESET', 'max_tokens', 'undefined', 'Error', error.name]) expect(result.reply).not.toContain(internal);
    expect(result.reply).not.toMatch(/\n\s+at |\.ts:\d+|node_modules/);
  });

  it('a model failure in a background turn sends no reply', async () => {
    const { run } = setup([new ModelError({ message: 'boom', status: 500, kind: 'server' })], [], { background: true });
    const result = await run();
    expect(result.status).toBe('failed');
    expect(result.reply).toBeUndefined();
  });
});

describe('runAgentLoop: cancellation and inbox', () => {
  it('abort while a slow tool runs ends cancelled, and that tool result starts with cancelled', async () => {
    const controller = new AbortController();
    let toolSignal: AbortSignal | undefined;
    let markStarted!: () => void;
    const started = new Promise<void>((r) => (markStarted = r));
    const slow: Tool = {
      name: 'download', description: '', parameters: open,
      run: (_args, ctx) => {
        toolSignal = ctx.signal;
        markStarted();
        return sleep(5_000).then(() => 'downloaded');
      },
    };
    const { model, messages, run } = setup([use(['download']), say('never')], [slow], { signal: controller.signal });
    const pending = run();
    await started;
    controller.abort();
    const t0 = Date.now();
    const result = await pending;
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(result.status).toBe('cancelled');
    expect(result.reply).toBeUndefined();
    expect(model.requests).toHaveLength(1);
    expect(toolMessages(messages)[0].content).toMatch(/^cancelled/);
    expect(toolSignal?.aborted).toBe(true);
  });

  it('inbox messages are appended before the next model call', async () => {
    // The turn's own messages were read as it began; the inbox is read before each later model call.
    const inbox: ChatMessage[][] = [[{ role: 'user', content: 'also, bring snacks' }], []];
    const { tool } = counterTool('lookup');
    const { model, events, run } = setup([use(['lookup']), say('Noted, snacks too.')], [tool], { drainInbox: async () => inbox.shift() ?? [] });
    const result = await run();
    expect(result.reply).toBe('Noted, snacks too.');
    expect(model.requests[0].messages.some((m) => m.content === 'also, bring snacks')).toBe(false);
    const second = model.requests[1].messages;
    expect(second.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(second[3]).toEqual({ role: 'user', content: 'also, bring snacks' });
    expect(events.some((e) => e.type === 'message' && e.fromInbox && e.message.content === 'also, bring snacks')).toBe(true);
  });
});

describe('runAgentLoop: every request within the budget', () => {
  const BUDGET = DEFAULT_HISTORY_BUDGET.maxChars;
  const charsOf = (messages: ChatMessage[]) => messages.reduce((n, m) => n + messageSize(m), 0);
  /** Every tool call is followed by its result, and every result follows its call: what providers insist on. */
  const expectCallsPaired = (messages: ChatMessage[]) => {
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      if (m.role === 'assistant' && m.toolCalls?.length) {
        const results = messages.slice(i + 1, i + 1 + m.toolCalls.length);
        expect(results.map((r) => (r.role === 'tool' ? r.toolCallId : r.role))).toEqual(m.toolCalls.map((c) => c.id));
      }
      if (m.role === 'tool') {
        const call = messages.slice(0, i).findLast((p) => p.role === 'assistant');
        expect(call?.role === 'assistant' && call.toolCalls?.some((c) => c.id === m.toolCallId)).toBe(true);
      }
    }
  };

  it('2,000 messages arriving during one tool call: the next request is within the budget, shows the newest, and says how many are left out', async () => {
    const waiting: ChatMessage[] = [];
    const arrivedText = (i: number) => `message ${i}: ${'x'.repeat(1_000)}`;
    const crawl: Tool = {
      name: 'crawl', description: '', parameters: open,
      async run() {
        for (let i = 1; i <= 2_000; i++) waiting.push({ role: 'user', content: arrivedText(i) });
        return 'crawled 3 pages';
      },
    };
    const { model, messages, events, run } = setup([use(['crawl']), say('Caught up.')], [crawl], {
      drainInbox: async () => waiting.splice(0),
    });
    const result = await run();
    expect(result.reply).toBe('Caught up.');

    const second = model.requests[1].messages;
    expect(charsOf(second)).toBeLessThanOrEqual(BUDGET);
    expect(second[0]).toEqual({ role: 'user', content: 'hello bot' });
    expect(second.slice(1, 3).map((m) => m.role)).toEqual(['assistant', 'tool']);
    expect(second[2].content).toBe('crawled 3 pages');
    const note = second[3].content.match(/^\[Parlor\] (\d+) more messages arrived while you were working; only the latest (\d+) are shown\.$/);
    expect(note).not.toBeNull();
    const [left, shown] = [Number(note![1]), Number(note![2])];
    expect(left + shown).toBe(2_000);
    expect(shown).toBeGreaterThan(10);
    expect(second.slice(4).map((m) => m.content)).toEqual(Array.from({ length: shown }, (_, k) => arrivedText(2_000 - shown + 1 + k)));

    // The turn keeps (and reports for storage) every message; only the request is bounded.
    expect(messages.filter((m) => m.role === 'user')).toHaveLength(2_001);
    expect(events.filter((e) => e.type === 'message' && e.fromInbox)).toHaveLength(2_000);
  });

  it('large tool results piling up over many steps: every request is within the budget, the oldest results give way, the newest stays whole', async () => {
    const log: Tool = { name: 'read_log', description: '', parameters: open, run: async (args) => `${JSON.stringify(args)} ${'L'.repeat(30_000)}` };
    const steps = [...Array.from({ length: 10 }, (_, part) => use(['read_log', { part }])), say('Read it all.')];
    const { model, messages, run } = setup(steps, [log]);
    expect((await run()).reply).toBe('Read it all.');
    expect(model.requests).toHaveLength(11);

    for (const [n, request] of model.requests.entries()) {
      expect(charsOf(request.messages)).toBeLessThanOrEqual(BUDGET);
      expect(request.messages[0]).toEqual({ role: 'user', content: 'hello bot' });
      expectCallsPaired(request.messages);
      const results = toolMessages(request.messages);
      expect(results).toHaveLength(n); // every call so far is still there, with its result or a placeholder
      if (n === 0) continue;
      expect(results.at(-1)!.content).toBe(`{"part":${n - 1}} ${'L'.repeat(30_000)}`);
      const whole = results.filter((r) => r.content.endsWith('L'.repeat(30_000)));
      const omitted = results.filter((r) => /^\[result of read_log omitted to fit the context: 30011 characters\]$/.test(r.content));
      expect(whole.length + omitted.length).toBe(n);
      // Oldest first: the placeholders are all before the whole results.
      expect(results.slice(0, omitted.length)).toEqual(omitted);
    }
    expect(toolMessages(model.requests[10].messages).filter((r) => r.content.startsWith('[result of')).length).toBe(8);
    // The turn's own record keeps every result whole.
    expect(toolMessages(messages).map((m) => m.content.length)).toEqual(Array(10).fill(30_011));
  });

  it("earlier history gives way before this turn's tool results do", async () => {
    const history: ChatMessage[] = [
      { role: 'user', content: `an earlier question ${'q'.repeat(20_000)}` },
      { role: 'assistant', content: `an earlier answer ${'a'.repeat(20_000)}` },
      { role: 'user', content: 'hello bot' },
    ];
    const lookup: Tool = { name: 'lookup', description: '', parameters: open, run: async (args) => `${JSON.stringify(args)} ${'R'.repeat(15_000)}` };
    const steps = [...Array.from({ length: 6 }, (_, n) => use(['lookup', { n }])), say('done')];
    const { model, run } = setup(steps, [lookup], { messages: history });
    await run();
    const hasHistory = model.requests.map((r) => r.messages.some((m) => m.content.startsWith('an earlier')));
    expect(hasHistory).toEqual([true, true, true, false, false, false, false]);
    const omitted = model.requests.map((r) => toolMessages(r.messages).filter((m) => m.content.startsWith('[result of lookup omitted')).length);
    expect(omitted).toEqual([0, 0, 0, 0, 0, 0, 1]);
    for (const request of model.requests) {
      expect(charsOf(request.messages)).toBeLessThanOrEqual(BUDGET);
      expect(request.messages[0]).toEqual(request.messages.some((m) => m.content.startsWith('an earlier')) ? history[0] : history[2]);
    }
  });

  it('takes the budget as an option', async () => {
    const big: Tool = { name: 'dump', description: '', parameters: open, run: async (args) => `${JSON.stringify(args)} ${'D'.repeat(4_000)}` };
    const { model, run } = setup([use(['dump', { n: 1 }]), use(['dump', { n: 2 }]), use(['dump', { n: 3 }]), say('ok')], [big], {
      budget: { maxMessages: 80, maxChars: 10_000 },
    });
    await run();
    const sizes = model.requests.map((r) => charsOf(r.messages));
    expect(sizes.every((n) => n <= 10_000)).toBe(true);
    expect(toolMessages(model.requests[3].messages).map((m) => m.content.startsWith('[result of dump omitted'))).toEqual([true, false, false]);
  });
});

describe('a model call cut short by /stop', () => {
  it('ends the turn cancelled, even when the stream ended without an error: its partial text is not an answer', async () => {
    const controller = new AbortController();
    const { run } = setup(
      [
        async () => {
          // The stream stops when the turn is stopped, and the SDK simply ends it.
          controller.abort('stop');
          return say('Half an ans');
        },
      ],
      [],
      { signal: controller.signal },
    );
    const result = await run();
    expect(result.status).toBe('cancelled');
    expect(result.reply).toBeUndefined();
  });
});
