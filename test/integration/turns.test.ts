import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { createBuiltinTools } from '../../tools/index.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { slowTool } from '../support/slow-tool.ts';

let h: Harness;
/** What the slow tool calls as it begins (a test sets it to wait for that). */
const slow = { started: () => {} };

beforeAll(async () => {
  h = await startHarness({
    personas: { testy: TEST_PERSONA },
    app: { tools: [...createBuiltinTools({ timezone: 'UTC' }), slowTool(slow)], history: { maxMessages: 40, maxChars: 40_000 } },
  });
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(() => {
  h.fake.reset();
  h.chat.sent.length = 0;
});

const rows = <T>(query: ReturnType<typeof sql>) => h.query<T>(query);

function dm(user: string, text: string) {
  return h.chat.inject({ text, chat: { id: user, type: 'dm' }, sender: { id: user } });
}

describe('the turn loop', () => {
  it('runs a tool call round trip and replies with the final text', async () => {
    h.fake.script({ toolCalls: [{ name: 'clock', arguments: { timezone: 'UTC' } }] }, (req) => ({
      text: `It is ${req.body.messages.at(-1).content.includes('UTC') ? 'known' : 'unknown'}`,
    }));
    await dm('u1', 'what time is it?');
    const [reply] = await h.chat.waitForSent(1);
    expect(reply.text).toBe('It is known');
    const tool = h.fake.requests[1].body.messages.at(-1);
    expect(tool.role).toBe('tool');
    expect(tool.content).toContain('ISO (UTC)');
  });

  it('lets the running loop read a message that arrives mid-turn before its next model call', async () => {
    const started = new Promise<void>((r) => (slow.started = r));
    h.fake.script({ toolCalls: [{ name: 'slow_task', arguments: { ms: 600 } }] }, { text: 'done with both' });
    await dm('u1', 'first message');
    await started;
    await dm('u1', 'oh, and a correction');
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests).toHaveLength(2);
    const second = h.fake.requests[1].body.messages.map((m: { content: string }) => m.content);
    expect(second).toContain('oh, and a correction');
    expect(h.chat.sent.map((m) => m.text)).toEqual(['done with both']);

    // The next turn reads the transcript in a shape providers accept: every tool result right after its call.
    await dm('u1', 'third message');
    await h.chat.waitForSent(2);
    const roles = h.fake.requests[2].body.messages.map((m: { role: string; tool_calls?: unknown }) => (m.tool_calls ? 'calls' : m.role));
    expect(roles.slice(-6)).toEqual(['user', 'calls', 'tool', 'user', 'assistant', 'user']);
    expect(h.fake.requests[2].body.messages.at(-3).content).toBe('oh, and a correction');
  });

  it('/stop cancels the running turn at once, without waiting behind it', async () => {
    const started = new Promise<void>((r) => (slow.started = r));
    h.fake.script({ toolCalls: [{ name: 'slow_task', arguments: { ms: 20_000 } }] });
    await dm('u1', 'do the long thing');
    await started;
    const t0 = Date.now();
    await dm('u1', '/stop');
    const [ack] = await h.chat.waitForSent(1);
    expect(ack.text).toBe('Stopped.');
    await h.app.waitForIdle('testy:chat:u1', 5000);
    expect(Date.now() - t0).toBeLessThan(3000);
    const [turn] = await rows<{ status: string }>(sql`select status from turns where conversation_id = 'testy:chat:u1' order by started_at desc limit 1`);
    expect(turn.status).toBe('cancelled');
    const [toolResult] = await rows<{ content: { content: string } }>(
      sql`select content from messages where conversation_id = 'testy:chat:u1' and role = 'tool' order by id desc limit 1`,
    );
    expect(toolResult.content.content).toMatch(/^cancelled/);
    expect(h.fake.requests).toHaveLength(1);
  });

  it('fails visibly with a short apology when the model endpoint is down', async () => {
    h.fake.setDefault(() => ({ status: 503, text: 'upstream exploded at /srv/model.py line 12' }));
    await dm('u2', 'are you there?');
    const [reply] = await h.chat.waitForSent(1, 15_000);
    expect(reply.text).toMatch(/^Sorry, I couldn't reach the model/);
    expect(reply.text).not.toMatch(/503|exploded|\.py|at /);
    expect(h.fake.requests.length).toBeGreaterThan(1); // retried before giving up
    await h.app.waitForIdle('testy:chat:u2');
    const [turn] = await rows<{ status: string; error: string }>(sql`select status, error from turns where conversation_id = 'testy:chat:u2' order by started_at desc limit 1`);
    expect(turn.status).toBe('failed');
  });

  it('survives malformed tool-call JSON from the model: the model reads invalid_arguments and recovers', async () => {
    h.fake.script({ toolCalls: [{ name: 'clock', arguments: '{"timezone": ' }] }, { toolCalls: [{ name: 'no_such_tool', arguments: {} }] }, { text: 'recovered' });
    await dm('u1', 'time please');
    const [reply] = await h.chat.waitForSent(1);
    expect(reply.text).toBe('recovered');
    expect(h.fake.requests[1].body.messages.at(-1).content).toMatch(/^invalid_arguments: the arguments are not valid JSON/);
    expect(h.fake.requests[2].body.messages.at(-1).content).toMatch(/^unknown_tool/);
  });

  it('does not post twice when a finished turn job is delivered again', async () => {
    await dm('u1', 'once please');
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    const [turn] = await rows<{ job_id: string; origin: unknown }>(sql`select job_id, origin from turns where conversation_id = 'testy:chat:u1' order by started_at desc limit 1`);
    await h.app.runner.run({ id: turn.job_id, retryCount: 1, data: { conversationId: 'testy:chat:u1', persona: 'testy', kind: 'user', origin: turn.origin as never } });
    expect(h.chat.sent).toHaveLength(1);
    expect(h.fake.requests).toHaveLength(1);
  });

  it('retries a failed send and records it once in the ledger', async () => {
    const { PlatformError } = await import('../../src/connector.ts');
    h.chat.failNext(2, new PlatformError({ platform: 'chat', method: 'send', status: 429, retryAfterMs: 50, message: 'slow down' }));
    await dm('u1', 'retry me');
    const [reply] = await h.chat.waitForSent(1, 15_000);
    expect(reply.text).toBe('echo: retry me');
    await h.app.waitForIdle('testy:chat:u1');
    const [row] = await rows<{ status: string; attempts: number }>(sql`select status, attempts from outbound_messages where text = 'echo: retry me'`);
    expect(row).toEqual({ status: 'sent', attempts: 3 });
  });
});

describe('background turns', () => {
  it('a heartbeat that ends skipped leaves no history and sends nothing', async () => {
    h.fake.script({ toolCalls: [{ name: 'end_task', arguments: { status: 'skipped' } }] });
    await h.app.jobs.enqueueTurn({ conversationId: 'testy:heartbeat', persona: 'testy', kind: 'heartbeat', prompt: 'check things' });
    await h.fake.waitForRequests(1);
    await h.app.waitForIdle('testy:heartbeat');
    expect(h.fake.requests[0].system).toContain('heartbeat');
    const [count] = await rows<{ n: number }>(sql`select count(*)::int as n from messages where conversation_id = 'testy:heartbeat'`);
    expect(count.n).toBe(0);
    const [turn] = await rows<{ status: string }>(sql`select status from turns where conversation_id = 'testy:heartbeat'`);
    expect(turn.status).toBe('skipped');
    expect(h.chat.sent).toHaveLength(0);
  });

  it('plain text in a background turn reaches nobody and forces one end_task follow-up', async () => {
    h.fake.script({ text: 'HEARTBEAT_OK nothing to do, internal notes' }, { toolCalls: [{ name: 'end_task', arguments: { status: 'skipped' } }] });
    await h.app.jobs.enqueueTurn({ conversationId: 'testy:cron:digest', persona: 'testy', kind: 'cron', prompt: 'digest' });
    await h.fake.waitForRequests(2);
    await h.app.waitForIdle('testy:cron:digest');
    expect(h.fake.requests[1].toolChoice).toEqual({ type: 'function', function: { name: 'end_task' } });
    expect(h.chat.sent).toHaveLength(0);
  });

  it('speaks through send_message, which goes to the primary chat', async () => {
    h.fake.script(
      { toolCalls: [{ name: 'send_message', arguments: { text: 'Your 9:00 is in 10 minutes.' } }] },
      { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] },
    );
    await h.app.jobs.enqueueTurn({ conversationId: 'testy:heartbeat', persona: 'testy', kind: 'heartbeat', prompt: 'check' });
    const [sent] = await h.chat.waitForSent(1);
    expect(sent).toMatchObject({ chat: 'u1', text: 'Your 9:00 is in 10 minutes.' });
    await h.app.waitForIdle('testy:heartbeat');
    expect(h.chat.sent).toHaveLength(1);
  });

  it('a failed background turn posts a short warning to the primary', async () => {
    h.fake.script({ toolCalls: [{ name: 'end_task', arguments: { status: 'failed', summary: 'calendar unreachable' } }] });
    await h.app.jobs.enqueueTurn({ conversationId: 'testy:cron:cal', persona: 'testy', kind: 'cron', prompt: 'sync' });
    const [warning] = await h.chat.waitForSent(1);
    expect(warning.chat).toBe('u1');
    expect(warning.text).toMatch(/cron turn failed/);
  });
});

describe('the history window', () => {
  it('keeps a turn in a 10,000-message conversation as small as one in a short conversation', async () => {
    const id = 'testy:chat:u2';
    await dm('u2', 'start');
    await h.chat.waitForSent(1);
    await h.app.waitForIdle(id);
    await h.app.database.db.execute(sql`
      insert into messages (conversation_id, turn_id, role, content)
      select ${id}, gen_random_uuid(), case when i % 2 = 0 then 'user' else 'assistant' end,
             jsonb_build_object('role', case when i % 2 = 0 then 'user' else 'assistant' end, 'content', 'old message ' || i)
      from generate_series(1, 10000) as i`);
    h.fake.reset();
    await dm('u2', 'newest');
    await h.chat.waitForSent(2);
    const sent = h.fake.requests[0].body.messages;
    expect(sent.length).toBeLessThanOrEqual(41); // system + the window
    expect(sent.at(-1).content).toBe('newest');
    expect(sent[1].role).toBe('user');
  });
});
