// Background tasks (spawn_subagent): fan-out, one wake per batch with every result, limits, status, cancel, /stop,
// and approvals asked in the parent's chat.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import type { FakeReply, RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';
import type { Tool } from '../../src/tools/types.ts';
import { createBuiltinTools } from '../../tools/index.ts';

/** Says which persona secrets the turn that calls it could hand to a tool. */
const secretsProbe: Tool<Record<string, never>> = {
  name: 'secrets_probe',
  description: 'Lists the secret names this turn may use.',
  parameters: { type: 'object', properties: {} },
  async run(_args, ctx) {
    return `secrets: ${Object.keys(ctx.persona.secrets).join(', ') || 'none'}`;
  },
};

let h: Harness;

const isTask = (req: RecordedRequest) => req.system.startsWith('You are a background task');
const isWake = (req: RecordedRequest) => req.lastUserText.startsWith('[subagent result');
const lastMessage = (req: RecordedRequest) => (req.body.messages as { role: string; content: string }[]).at(-1)!;
/** The results of the tool calls the request answers (the trailing tool messages). */
function toolResults(req: RecordedRequest): string[] {
  const messages = req.body.messages as { role: string; content: string }[];
  const out: string[] = [];
  for (let i = messages.length - 1; i >= 0 && messages[i].role === 'tool'; i--) out.unshift(messages[i].content);
  return out;
}

/** What each kind of request answers; a test sets `parent` and `task` for its story. */
let parent: (req: RecordedRequest) => FakeReply;
let task: (req: RecordedRequest) => FakeReply;

function model(req: RecordedRequest): FakeReply {
  if (isTask(req)) return task(req);
  if (isWake(req)) return { text: `summary of:\n${req.lastUserText}` };
  return parent(req);
}

/** The parent spawns these tasks, then says it is working on it. */
function spawning(...tasks: { task: string; label?: string }[]) {
  return (req: RecordedRequest): FakeReply =>
    lastMessage(req).role === 'tool' ? { text: 'Working on it.' } : { toolCalls: tasks.map((t) => ({ name: 'spawn_subagent', arguments: t })) };
}

const handles = (text: string) => [...text.matchAll(/sub_[0-9a-f]+/g)].map((m) => m[0]);

beforeAll(async () => {
  h = await startHarness({
    personas: {
      testy: {
        ...TEST_PERSONA,
        tools: { approve: ['clock'], subagents: { perTurn: 3, running: 2, maxIterations: 3, timeoutSeconds: 10 } },
        env: 'SHOP_TOKEN=s3cret\n',
      },
    },
    connector: { buttons: true },
    app: { tools: [...createBuiltinTools({ timezone: 'UTC' }), secretsProbe] },
  });
});
afterAll(() => h?.stop());
// Every test starts with nothing left over: all tasks ended, their results pushed and answered.
afterEach(async () => {
  let open: unknown[] = [];
  await until(
    async () => (open = await h.query(sql`select handle, label, status, pushed_at from subagent_tasks where status in ('queued', 'running') or pushed_at is null`)).length === 0,
    () => `every task to end and be pushed; open: ${JSON.stringify(open)}`,
    40_000,
  );
  let running: unknown[] = [];
  await until(
    async () => (running = await h.query(sql`select conversation_id, kind, started_at from turns where status = 'running'`)).length === 0,
    () => `every turn to end; running: ${JSON.stringify(running)}`,
    20_000,
  );
  await h.app.waitForIdle('testy:chat:u1');
}, 70_000);
beforeEach(() => {
  h.fake.reset();
  h.fake.setDefault(model);
  h.chat.sent.length = 0;
  parent = spawning();
  task = (req) => ({ text: `done: ${req.lastUserText}` });
});

const texts = () => h.chat.sent.map((m) => m.text);
const waitForText = (pattern: RegExp, timeoutMs = 20_000) =>
  until(() => h.chat.sent.find((m) => pattern.test(m.text)), () => `a message matching ${pattern}; sent ${JSON.stringify(texts())}`, timeoutMs);

describe('spawn_subagent', () => {
  it('three tasks, one failing: the parent answers at once, then one wake brings all three results to its chat', async () => {
    parent = spawning({ task: 'research alpha', label: 'alpha' }, { task: 'research beta', label: 'beta' }, { task: 'research gamma', label: 'gamma' });
    task = (req) => (req.lastUserText.includes('gamma') ? { status: 500, text: 'the model is down' } : { text: `found ${req.lastUserText.split(' ').at(-1)}`, delayMs: 200 });
    await h.chat.inject({ text: 'compare alpha, beta and gamma' });
    await waitForText(/^Working on it\.$/);
    const summary = await waitForText(/^summary of:/);
    await h.app.waitForIdle('testy:chat:u1');
    expect(summary.chat).toBe('u1');
    const wakes = h.fake.requests.filter(isWake);
    expect(wakes).toHaveLength(1);
    const wake = wakes[0].lastUserText;
    expect(wake).toMatch(/^\[subagent results\] 3 tasks you started have ended:/);
    expect(wake).toMatch(/sub_[0-9a-f]+ "alpha": ok\n {2}found alpha/);
    expect(wake).toMatch(/sub_[0-9a-f]+ "beta": ok\n {2}found beta/);
    expect(wake).toMatch(/sub_[0-9a-f]+ "gamma": failed \(/);
    expect(texts()).toEqual(['Working on it.', expect.stringMatching(/^summary of:/)]);
    // Each task worked in its own conversation, from its task alone: no soul, no history, no people-facing tools.
    const taskRequests = h.fake.requests.filter(isTask);
    for (const req of taskRequests) {
      expect(req.system).not.toContain('You are Testy');
      expect(req.body.messages.filter((m: { role: string }) => m.role !== 'system')).toHaveLength(1);
      expect(req.toolNames).not.toEqual(expect.arrayContaining(['send_message']));
      for (const name of ['send_message', 'ask_user', 'react', 'reply_to_origin', 'remind', 'schedule_wakeup', 'spawn_subagent']) expect(req.toolNames).not.toContain(name);
    }
    const rows = await h.query<{ status: string; pushed: boolean }>(sql`select status, pushed_at is not null as pushed from subagent_tasks order by label`);
    expect(rows).toEqual([
      { status: 'ok', pushed: true },
      { status: 'ok', pushed: true },
      { status: 'failed', pushed: true },
    ]);
  });

  it('refuses more tasks than one turn may start, and a task cannot start tasks of its own', async () => {
    parent = spawning(...['a', 'b', 'c', 'd'].map((x) => ({ task: `job ${x}` })));
    await h.chat.inject({ text: 'four jobs please' });
    await waitForText(/^Working on it\.$/);
    const results = toolResults(h.fake.requests.find((r) => !isTask(r) && lastMessage(r).role === 'tool')!);
    expect(results.filter((r) => r.startsWith('started sub_'))).toHaveLength(3);
    // The calls run side by side: whichever comes fourth is refused.
    expect(results.filter((r) => r === 'refused: this turn has started 3 subagents already, the most one turn may; wait for their results')).toHaveLength(1);
    await waitForText(/^summary of:/);
    await h.app.waitForIdle('testy:chat:u1');
    for (const req of h.fake.requests.filter(isTask)) expect(req.toolNames).not.toContain('spawn_subagent');
  });

  it('runs at most the persona\'s limit at once; the rest wait and start as places free', async () => {
    parent = spawning({ task: 'slow one' }, { task: 'slow two' }, { task: 'slow three' });
    task = () => ({ text: 'ok', delayMs: 600 });
    await h.chat.inject({ text: 'three slow jobs' });
    const working = await waitForText(/^Working on it\.$/);
    expect(working).toBeDefined();
    const spawned = toolResults(h.fake.requests.find((r) => !isTask(r) && lastMessage(r).role === 'tool')!);
    expect(spawned.filter((r) => r.includes('waiting for a free place'))).toHaveLength(1);
    await waitForText(/^summary of:/);
    await h.app.waitForIdle('testy:chat:u1');
    const rows = await h.query<{ started_at: Date | string; finished_at: Date | string }>(sql`select started_at, finished_at from subagent_tasks where task like 'slow%' order by started_at`);
    expect(rows).toHaveLength(3);
    // The third began only once one of the first two had ended.
    const at = (value: Date | string) => new Date(value).getTime();
    expect(at(rows[2].started_at)).toBeGreaterThanOrEqual(Math.min(at(rows[0].finished_at), at(rows[1].finished_at)));
  });
});

describe('what a task may do', () => {
  it('has none of the persona\'s secrets, which its parent has', async () => {
    parent = (req) =>
      lastMessage(req).role === 'tool'
        ? { text: `parent ${lastMessage(req).content}` }
        : { toolCalls: [{ name: 'secrets_probe', arguments: {} }, { name: 'spawn_subagent', arguments: { task: 'probe the secrets', label: 'probe' } }] };
    task = (req) => (lastMessage(req).role === 'tool' ? { text: `task ${lastMessage(req).content}` } : { toolCalls: [{ name: 'secrets_probe', arguments: {} }] });
    await h.chat.inject({ text: 'what secrets do we have?' });
    const summary = await waitForText(/^summary of:/);
    expect(toolResults(h.fake.requests.find((r) => !isTask(r) && lastMessage(r).role === 'tool')!)[0]).toBe('secrets: SHOP_TOKEN');
    expect(summary.text).toMatch(/"probe": ok\n {2}task secrets: none/);
  });

  it('stops at its step limit, and says so in the result', async () => {
    parent = spawning({ task: 'loop forever', label: 'looper' });
    task = () => ({ toolCalls: [{ name: 'think_harder', arguments: {} }] });
    await h.chat.inject({ text: 'do something endless' });
    const summary = await waitForText(/^summary of:/);
    expect(summary.text).toMatch(/"looper": failed \(stopped after 3 steps\)/);
  });

  it('ends as "timeout" past its time budget', async () => {
    parent = spawning({ task: 'take your time', label: 'slowpoke' });
    task = () => ({ toolCalls: [{ name: 'think_harder', arguments: {} }], delayMs: 10_500 });
    await h.chat.inject({ text: 'something slow' });
    const summary = await waitForText(/^summary of:/, 30_000);
    expect(summary.text).toMatch(/"slowpoke": timeout/);
  }, 40_000);

  it('a long result reaches the parent cut to a bound, saying how much more its conversation holds', async () => {
    parent = spawning({ task: 'write a lot', label: 'essay' });
    task = () => ({ text: 'x'.repeat(5000) });
    await h.chat.inject({ text: 'an essay please' });
    const summary = await waitForText(/^summary of:/);
    expect(summary.text).toContain(`${'x'.repeat(2000)}… [3000 more characters in the task's conversation]`);
  });
});

describe('task_status and task_cancel', () => {
  it('"what are you working on?" gets the true state, and a cancelled task comes back as cancelled', async () => {
    parent = spawning({ task: 'a long investigation', label: 'deep dive' });
    task = () => ({ toolCalls: [{ name: 'think_harder', arguments: { problem: 'x' } }], delayMs: 30_000 });
    await h.chat.inject({ text: 'investigate deeply' });
    await waitForText(/^Working on it\.$/);
    await h.app.waitForIdle('testy:chat:u1');
    await until(async () => (await h.query(sql`select 1 from turns where kind = 'task' and status = 'running'`)).length === 1, 'the task to be running');

    parent = (req) => (lastMessage(req).role === 'tool' ? { text: `status: ${lastMessage(req).content}` } : { toolCalls: [{ name: 'task_status', arguments: {} }] });
    await h.chat.inject({ text: 'what are you working on?' });
    const status = await waitForText(/^status: /);
    // Newest first: this one, then the tasks of earlier requests in this chat, each with how it ended.
    const [first, ...earlier] = status.text.split('\n');
    expect(first).toMatch(/^status: sub_[0-9a-f]+ "deep dive": running · started \S+ · \d+ s · 0 model steps$/);
    for (const line of earlier) expect(line).toMatch(/^sub_[0-9a-f]+( "[^"]+")?: (ok|failed|cancelled|timeout) · /);
    await h.app.waitForIdle('testy:chat:u1');

    parent = (req) => (lastMessage(req).role === 'tool' ? { text: `cancel: ${lastMessage(req).content}` } : { toolCalls: [{ name: 'task_cancel', arguments: { handle: 'all' } }] });
    await h.chat.inject({ text: 'never mind, stop it' });
    const cancel = await waitForText(/^cancel: /);
    expect(cancel.text).toMatch(/^cancel: sub_[0-9a-f]+: stopping; its result arrives as cancelled$/);
    const summary = await waitForText(/^summary of:/, 15_000);
    expect(summary.text).toMatch(/sub_[0-9a-f]+ "deep dive": cancelled/);
    await h.app.waitForIdle('testy:chat:u1');
  });

  it('/stop in the chat cancels its tasks too, running and waiting', async () => {
    parent = spawning({ task: 'long a' }, { task: 'long b' }, { task: 'long c' });
    task = () => ({ text: 'late', delayMs: 30_000 });
    await h.chat.inject({ text: 'three long jobs' });
    await waitForText(/^Working on it\.$/);
    await h.app.waitForIdle('testy:chat:u1');
    await h.chat.inject({ text: '/stop' });
    await waitForText(/^Cancelled 3 background tasks\.$/);
    const summary = await waitForText(/^summary of:/, 15_000);
    expect(handles(summary.text)).toHaveLength(3);
    expect(summary.text.match(/: cancelled/g)).toHaveLength(3);
    await h.app.waitForIdle('testy:chat:u1');
    const rows = await h.query<{ status: string }>(sql`select status from subagent_tasks where task like 'long%'`);
    expect(rows.map((r) => r.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
  });
});

describe('approvals inside a task', () => {
  it('are asked in the parent\'s chat, naming the task, and the task goes on once allowed', async () => {
    parent = spawning({ task: 'check the time', label: 'clock check' });
    task = (req) => (lastMessage(req).role === 'tool' ? { text: `the clock said: ${lastMessage(req).content}` } : { toolCalls: [{ name: 'clock', arguments: {} }] });
    await h.chat.inject({ text: 'what time is it, in the background' });
    const question = await waitForText(/^🔐 testy wants to run clock \(asked by subagent sub_[0-9a-f]+\)/);
    expect(question.chat).toBe('u1');
    const allow = question.buttons![0].find((b) => b.label === 'Allow once')!;
    await h.chat.inject({ kind: 'click', text: '', data: allow.data, messageId: 'q-msg' });
    const summary = await waitForText(/^summary of:/);
    expect(summary.text).toMatch(/"clock check": ok\n {2}the clock said: /);
    await h.app.waitForIdle('testy:chat:u1');
  });
});
