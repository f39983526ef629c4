import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(() => {
  h.fake.reset();
  h.chat.sent.length = 0;
});

const rows = <T>(query: ReturnType<typeof sql>) => h.query<T>(query);

describe('a DM from an allowed user', () => {
  it('is answered through Postgres, a turn job and the model, and leaves a full record', async () => {
    const result = await h.chat.inject({ text: 'hello there' });
    expect(result).toEqual({ status: 'queued', conversationId: 'testy:chat:u1' });
    const [reply] = await h.chat.waitForSent(1);
    expect(reply).toMatchObject({ chat: 'u1', text: 'echo: hello there' });
    expect(h.fake.requests).toHaveLength(1);
    expect(h.fake.requests[0].system).toContain('You are Testy');
    expect(h.fake.requests[0].toolNames).toEqual(expect.arrayContaining(['end_task', 'clock', 'send_message', 'think_harder']));

    await h.app.waitForIdle('testy:chat:u1');
    const turns = await rows<{ status: string; kind: string; input_tokens: number; output_tokens: number }>(
      sql`select status, kind, input_tokens, output_tokens from turns where conversation_id = 'testy:chat:u1'`,
    );
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatchObject({ status: 'ok', kind: 'user' });
    expect(turns[0].input_tokens).toBeGreaterThan(0);
    const messages = await rows<{ role: string }>(sql`select role from messages where conversation_id = 'testy:chat:u1' order by id`);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const [usage] = await rows<{ usage: { input: number; output: number } }>(
      sql`select content->'usage' as usage from messages where conversation_id = 'testy:chat:u1' and role = 'assistant'`,
    );
    expect(usage.usage.input).toBeGreaterThan(0);
    expect(usage.usage.output).toBeGreaterThan(0);
    expect(JSON.stringify(h.fake.requests[0].body)).not.toContain('"usage"');
    const outbound = await rows<{ status: string; text: string }>(sql`select status, text from outbound_messages where chat = 'u1'`);
    expect(outbound).toEqual([{ status: 'sent', text: 'echo: hello there' }]);
  });

  it('is committed with its turn job before the platform is acknowledged', async () => {
    h.fake.script({ text: 'slow', delayMs: 300 });
    const result = await h.chat.inject({ text: 'durable?', externalId: 'durable-1' });
    expect(result.status).toBe('queued');
    // The handler has returned (the connector would ack now): message, event and job are all committed.
    const [event] = await rows<{ n: number }>(sql`select count(*)::int as n from inbound_events where external_id = 'durable-1'`);
    expect(event.n).toBe(1);
    const [message] = await rows<{ n: number }>(sql`select count(*)::int as n from messages where content->>'content' = 'durable?'`);
    expect(message.n).toBe(1);
    const [job] = await rows<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'turn' and singleton_key = 'testy:chat:u1'`);
    expect(job.n).toBeGreaterThan(0);
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
  });

  it('is answered once when the platform delivers it twice', async () => {
    const turnJobs = async () =>
      (await rows<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'turn' and singleton_key = 'testy:chat:u1'`))[0].n;
    const jobsBefore = await turnJobs();
    const first = await h.chat.inject({ text: 'only once', externalId: 'dup-1' });
    const second = await h.chat.inject({ text: 'only once', externalId: 'dup-1' });
    expect(first.status).toBe('queued');
    expect(second.status).toBe('duplicate');
    // The second delivery's job went with its transaction: one turn job, not a second that would find nothing to do.
    expect(await turnJobs()).toBe(jobsBefore + 1);
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    await new Promise((r) => setTimeout(r, 200));
    expect(h.chat.sent.map((m) => m.text)).toEqual(['echo: only once']);
    expect(h.fake.requests).toHaveLength(1);
  });
});

describe('a DM from a stranger', () => {
  it('gets one short reply naming their id, at most once a day, and no model call', async () => {
    const first = await h.chat.inject({ text: 'hi', chat: { id: 'u9', type: 'dm' }, sender: { id: 'u9' } });
    expect(first.status).toBe('refused');
    const [notice] = await h.chat.waitForSent(1);
    expect(notice.chat).toBe('u9');
    expect(notice.text).toContain('chat:u9');
    await h.chat.inject({ text: 'hello??', chat: { id: 'u9', type: 'dm' }, sender: { id: 'u9' } });
    await new Promise((r) => setTimeout(r, 200));
    expect(h.chat.sent).toHaveLength(1);
    expect(h.fake.requests).toHaveLength(0);
    const [stored] = await rows<{ n: number }>(sql`select count(*)::int as n from messages where conversation_id like '%u9%'`);
    expect(stored.n).toBe(0);
  });

  it('cannot reach the persona by claiming to be a bot or the terminal', async () => {
    const spoof = await h.chat.inject({ text: 'let me in', chat: { id: 'u8', type: 'dm' }, sender: { id: 'u8' }, persona: 'testy', trusted: true });
    expect(spoof.status).toBe('refused');
    const [notice] = await h.chat.waitForSent(1);
    expect(notice.chat).toBe('u8');
    expect(h.fake.requests).toHaveLength(0);
  });
});

describe('group chats', () => {
  it('needs a mention where the channel says so, and replies in place as a reply', async () => {
    expect((await h.chat.inject({ text: 'just chatting', chat: { id: 'g1', type: 'group' } })).status).toBe('ignored');
    const mentioned = await h.chat.inject({ text: '@testy what time is it', chat: { id: 'g1', type: 'group' }, mentioned: true, messageId: 'gm-1' });
    expect(mentioned).toEqual({ status: 'queued', conversationId: 'testy:chat:g1' });
    const [reply] = await h.chat.waitForSent(1);
    expect(reply).toMatchObject({ chat: 'g1', replyTo: 'gm-1' });
    expect(h.fake.requests[0].lastUserText).toBe('[Ana (chat:u1)] @testy what time is it');
  });

  it('answers a reply to the bot without a mention, and every message where no mention is needed', async () => {
    await h.chat.inject({ text: 'and tomorrow?', chat: { id: 'g1', type: 'group' }, replyToBot: true });
    await h.chat.inject({ text: 'anyone?', chat: { id: 'g2', type: 'group' } });
    const sent = await h.chat.waitForSent(2);
    expect(sent.map((m) => m.chat).sort()).toEqual(['g1', 'g2']);
  });

  it('ignores chats no persona owns, and threads are separate conversations', async () => {
    expect((await h.chat.inject({ text: '@testy hi', chat: { id: 'g9', type: 'group' }, mentioned: true })).status).toBe('ignored');
    const threaded = await h.chat.inject({ text: 'in a thread', chat: { id: 'g2', type: 'group', thread: 't1' } });
    expect(threaded.conversationId).toBe('testy:chat:g2:t1');
    const [reply] = await h.chat.waitForSent(1);
    expect(reply).toMatchObject({ chat: 'g2', thread: 't1' });
    expect(h.fake.requests).toHaveLength(1);
  });
});

describe('control commands', () => {
  it('/status, /think and /new answer at once without a model call', async () => {
    await h.chat.inject({ text: '/think on', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    await h.chat.inject({ text: '/status', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    const sent = await h.chat.waitForSent(2);
    expect(sent[0].text).toMatch(/thinking harder/i);
    expect(sent[1].text).toContain('Persona: testy');
    expect(sent[1].text).toContain('Thinking: on');
    expect(h.fake.requests).toHaveLength(0);

    await h.chat.inject({ text: 'remember the word banana', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    await h.chat.waitForSent(3);
    await h.app.waitForIdle('testy:chat:u2');
    expect(h.fake.requests[0].body.reasoning_effort).toBe('high');
    await h.chat.inject({ text: '/new', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    await h.chat.inject({ text: 'what word?', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    await h.chat.waitForSent(5);
    const contents = h.fake.requests[1].body.messages.map((m: { content: string }) => m.content).join('\n');
    expect(contents).toContain('what word?');
    expect(contents).not.toContain('banana');
  });
});

describe('events that cannot be stored', () => {
  const trigger = (condition: string, raise: string) =>
    h.query(
      sql.raw(`
      create or replace function refuse_some() returns trigger language plpgsql as $$
      begin
        if ${condition} then ${raise}; end if;
        return new;
      end $$;
      create or replace trigger refuse_some before insert on messages for each row execute function refuse_some();`),
    );
  afterEach(async () => {
    await h.query(sql`drop trigger if exists refuse_some on messages`);
  });

  it('are refused twice (so the platform delivers them again) and dead-lettered on the third try, kept raw', async () => {
    await trigger(`new.content->>'content' like '%poison%'`, `raise exception 'poisoned message'`);
    const event = { text: 'poison \u0000 and a lone \ud800', externalId: 'poison-1' };
    await expect(h.chat.inject(event)).rejects.toThrow();
    await expect(h.chat.inject(event)).rejects.toThrow();
    expect(await h.chat.inject(event)).toEqual({ status: 'ignored' });
    const [row] = await rows<{ attempts: number; dead_lettered: boolean; last_error: string; raw: string }>(
      sql`select attempts, dead_lettered, last_error, raw from inbound_failures where connector = 'chat' and external_id = 'poison-1'`,
    );
    expect(row).toMatchObject({ attempts: 3, dead_lettered: true, last_error: 'P0001: poisoned message' });
    // The raw event as it arrived, NUL and broken surrogate included, escaped so it could be stored.
    expect(JSON.parse(row.raw).text).toBe('poison \u0000 and a lone \ud800');
    // Messages after it go through.
    await h.chat.inject({ text: 'and the next one' });
    const [reply] = await h.chat.waitForSent(1);
    expect(reply.text).toBe('echo: and the next one');
  });

  it('are not stored when their turn cannot be enqueued: nothing is written, and the platform delivers them again', async () => {
    await h.query(
      sql.raw(`
      create or replace function refuse_turn_job() returns trigger language plpgsql as $$
      begin
        if new.name = 'turn' and new.data->'origin'->>'chat' = 'u1' then raise exception 'no room for jobs'; end if;
        return new;
      end $$;
      create or replace trigger refuse_turn_job before insert on pgboss.job for each row execute function refuse_turn_job();`),
    );
    try {
      await expect(h.chat.inject({ text: 'jobless', externalId: 'jobless-1' })).rejects.toThrow(/no room for jobs/);
      const [written] = await rows<{ events: number; messages: number }>(
        sql`select (select count(*)::int from inbound_events where external_id = 'jobless-1') as events,
          (select count(*)::int from messages where content->>'content' = 'jobless') as messages`,
      );
      expect(written).toEqual({ events: 0, messages: 0 });
    } finally {
      await h.query(sql`drop trigger if exists refuse_turn_job on pgboss.job`);
    }
    // Delivered again once jobs can be enqueued: stored and answered, once.
    expect((await h.chat.inject({ text: 'jobless', externalId: 'jobless-1' })).status).toBe('queued');
    const [reply] = await h.chat.waitForSent(1);
    expect(reply.text).toBe('echo: jobless');
  });

  it('leave no turn job when the message cannot be written after the job went out beside it', async () => {
    const turnJobs = async () =>
      (await rows<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'turn' and singleton_key = 'testy:chat:u1'`))[0].n;
    const jobsBefore = await turnJobs();
    await h.query(
      sql.raw(`
      create or replace function refuse_message() returns trigger language plpgsql as $$
      begin
        if new.content->>'content' = 'unwritable' then raise exception 'no room for messages'; end if;
        return new;
      end $$;
      create or replace trigger refuse_message before insert on messages for each row execute function refuse_message();`),
    );
    try {
      await expect(h.chat.inject({ text: 'unwritable', externalId: 'unwritable-1' })).rejects.toThrow(/no room for messages/);
      expect(await turnJobs()).toBe(jobsBefore);
      const [events] = await rows<{ n: number }>(sql`select count(*)::int as n from inbound_events where external_id = 'unwritable-1'`);
      expect(events.n).toBe(0);
    } finally {
      await h.query(sql`drop trigger if exists refuse_message on messages`);
    }
  });

  it('are never dead-lettered for a failure of the database itself (a deadlock, a lost connection)', async () => {
    await trigger(`new.content->>'content' like '%unlucky%'`, `raise exception 'deadlock detected' using errcode = '40P01'`);
    for (let i = 0; i < 4; i++) await expect(h.chat.inject({ text: 'unlucky timing', externalId: 'transient-1' })).rejects.toThrow();
    const failures = await rows<{ n: number }>(sql`select count(*)::int as n from inbound_failures where external_id = 'transient-1'`);
    expect(failures[0].n).toBe(0);
  });

  it('store NUL-free, well-formed text and answer it', async () => {
    await h.chat.inject({ text: 'a nul\u0000 and a lone \udc00 surrogate', sender: { id: 'u1', name: 'A\u0000na' } });
    const [reply] = await h.chat.waitForSent(1);
    expect(reply.text).toBe('echo: a nul and a lone \ufffd surrogate');
    await h.app.waitForIdle('testy:chat:u1');
  });
});

describe('a DM delivered again', () => {
  it('delivered again once its conversation is idle, starts nothing: its job is deleted untaken, and the next DM is answered', async () => {
    await h.chat.inject({ text: 'first time', externalId: 'again-1' });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    const turnsBefore = await rows<{ n: number }>(sql`select count(*)::int as n from turns where conversation_id = 'testy:chat:u1'`);
    // The turn's start goes out behind the redelivery's transaction, but takes the job only while messages wait.
    expect((await h.chat.inject({ text: 'first time', externalId: 'again-1' })).status).toBe('duplicate');
    const open = await rows<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'turn' and singleton_key = 'testy:chat:u1' and state < 'completed'`);
    expect(open).toEqual([{ n: 0 }]);
    expect(await rows<{ n: number }>(sql`select count(*)::int as n from turns where conversation_id = 'testy:chat:u1'`)).toEqual(turnsBefore);
    await h.chat.inject({ text: 'and then' });
    await h.chat.waitForSent(2);
    expect(h.chat.sent.map((m) => m.text)).toEqual(['echo: first time', 'echo: and then']);
    await h.app.waitForIdle('testy:chat:u1');
  });
});
