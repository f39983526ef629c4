import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { startMaintenance } from '../../src/jobs/maintenance.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  // No workers in the main app: the test plays a worker that keeps failing.
  h = await startHarness({ app: { worker: false } });
});
afterAll(async () => {
  await h?.stop();
});

describe('/stop before the turn has started', () => {
  it('sets the waiting message aside, so its queued job does nothing', async () => {
    await h.chat.inject({ text: 'a long task, please', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    await h.chat.inject({ text: '/stop', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    const [ack] = await h.chat.waitForSent(1);
    expect(ack.text).toBe('Stopped: I will not answer that message.');
    const peer = await h.startPeer({ connectors: () => [] });
    await peer.waitForIdle('testy:chat:u2');
    expect(h.fake.requests).toHaveLength(0);
    await peer.stop();
    h.chat.sent.length = 0;
  });
});

describe('a turn job that failed for good', () => {
  it('is released, so the conversation is not stuck behind it, and the user is told', async () => {
    const { boss } = h.app.jobs;
    // Exhaust its retries as a crashing worker would.
    await boss.updateQueue(QUEUES.turn, { retryLimit: 0 });
    await h.app.jobs.enqueueTurn({
      conversationId: 'testy:chat:u1',
      persona: 'testy',
      kind: 'user',
      origin: { connector: 'chat', chat: 'u1', chatType: 'dm' },
    });
    const [job] = await boss.fetch(QUEUES.turn);
    await boss.fail(QUEUES.turn, job.id, new Error('worker crashed'));
    await boss.updateQueue(QUEUES.turn, { retryLimit: 5 });
    const [state] = (await h.app.database.db.execute(sql`select state from pgboss.job where id = ${job.id}`)) as unknown as { state: string }[];
    expect(state.state).toBe('failed');

    // A new message queues behind the failed job, which holds the conversation's key.
    await h.chat.inject({ text: 'hello after the crash' });
    const peer = await h.startPeer({ connectors: () => [] });
    await new Promise((r) => setTimeout(r, 1500));
    expect(h.fake.requests).toHaveLength(0);

    const maintenance = h.app.maintenance ?? peer.maintenance!;
    await maintenance.runOnce();
    const sent = await h.chat.waitForSent(2, 15_000);
    expect(sent.map((m) => m.text)).toEqual(
      expect.arrayContaining(['Sorry, I could not finish your last request: it failed several times. Please send it again.', 'echo: hello after the crash']),
    );
    const [left] = (await h.app.database.db.execute(
      sql`select count(*)::int as n from pgboss.job where name = 'turn' and state = 'failed'`,
    )) as unknown as { n: number }[];
    expect(left.n).toBe(0);
    await peer.stop();
  });
});

describe('a turn job held by a process that is gone', () => {
  async function heldTurn(conversationId: string, claimedBy: string) {
    const { boss } = h.app.jobs;
    await h.app.jobs.enqueueTurn({ conversationId, persona: 'testy', kind: 'user', origin: { connector: 'chat', chat: conversationId, chatType: 'dm' } });
    const [job] = await boss.fetch(QUEUES.turn);
    await h.query(sql`insert into conversations (id, persona) values (${conversationId}, 'testy') on conflict do nothing`);
    await h.query(sql`insert into turns (id, conversation_id, kind, status, job_id, claimed_by) values (gen_random_uuid(), ${conversationId}, 'user', 'running', ${job.id}, ${claimedBy})`);
    return job;
  }
  const stateOf = async (id: string) =>
    ((await h.app.database.db.execute(sql`select state, retry_count from pgboss.job where id = ${id}`)) as unknown as { state: string; retry_count: number }[])[0];

  it('goes back to the queue once the process is seen gone at two passes; a live process keeps its own', async () => {
    const maintenance = startMaintenance({ database: h.app.database, jobs: h.app.jobs, delivery: h.app.delivery, personas: () => h.app.personas, log: pino({ level: 'silent' }), intervalMs: 3_600_000, goneSweepMs: 3_600_000 });
    try {
      await maintenance.runOnce(); // Its pass at the start.
      const gone = await heldTurn('testy:chat:gone1', 'parlor:gone:0');
      const live = await heldTurn('testy:chat:live1', h.app.database.applicationName);
      await maintenance.runOnce();
      // Seen gone once: a database blip drops every session for a moment, so nothing yet.
      expect((await stateOf(gone.id)).state).toBe('active');
      await maintenance.runOnce();
      expect((await stateOf(gone.id)).state).toBe('retry');
      expect((await stateOf(live.id)).state).toBe('active');

      // Handed out again (a new attempt) before its new holder claimed the turn: seen once, so left alone; then claimed.
      await h.query(sql`update pgboss.job set state = 'active', retry_count = retry_count + 1, started_on = now() where id = ${gone.id}`);
      await maintenance.runOnce();
      expect((await stateOf(gone.id)).state).toBe('active');
      await h.query(sql`update turns set claimed_by = ${h.app.database.applicationName} where job_id = ${gone.id}`);
      await maintenance.runOnce();
      await maintenance.runOnce();
      expect((await stateOf(gone.id)).state).toBe('active');
    } finally {
      await maintenance.stop();
      await h.query(sql`delete from pgboss.job where name = ${QUEUES.turn}`);
    }
  });
});

describe('pruning', () => {
  it('forgets old finished reminders, resolved questions and throwaway cron conversations, and keeps the rest', async () => {
    const peer = await h.startPeer({ connectors: () => [] });
    try {
      await h.query(sql`
        insert into reminders (id, persona, name, kind, conversation_id, prompt, due_at, status, created_at, last_fired_at) values
          (gen_random_uuid(), 'testy', 'old-done', 'reminder', 'c', 'p', now() - interval '60 days', 'done', now() - interval '60 days', now() - interval '60 days'),
          (gen_random_uuid(), 'testy', 'old-pending', 'reminder', 'c', 'p', now() + interval '1 day', 'pending', now() - interval '60 days', null),
          (gen_random_uuid(), 'testy', 'recent-done', 'reminder', 'c', 'p', now(), 'done', now() - interval '1 day', now())`);
      await h.query(sql`
        insert into questions (id, kind, persona, conversation_id, method, text, choices, status, expires_at, closed_at, created_at) values
          ('old-closed', 'ask', 'testy', 'c', 'ask_user', 'q', '[]'::jsonb, 'answered', now() - interval '60 days', now() - interval '60 days', now() - interval '60 days'),
          ('old-open', 'ask', 'testy', 'c', 'ask_user', 'q', '[]'::jsonb, 'pending', now() + interval '1 day', null, now() - interval '60 days')`);
      await h.query(sql`
        insert into conversations (id, persona, last_activity_at) values
          ('testy:cron:news:202601010800-0a1b2c3d', 'testy', now() - interval '60 days'),
          ('testy:cron:news:202611300800-4e5f6a7b', 'testy', now()),
          ('testy:cron:digest', 'testy', now() - interval '60 days')`);
      await peer.maintenance!.runOnce();
      const conversations = await h.query<{ id: string }>(sql`select id from conversations where id like 'testy:cron:%' order by id`);
      expect(conversations.map((c) => c.id)).toEqual(['testy:cron:digest', 'testy:cron:news:202611300800-4e5f6a7b']);
      const reminders = await h.query<{ name: string }>(sql`select name from reminders order by name`);
      expect(reminders.map((r) => r.name)).toEqual(['old-pending', 'recent-done']);
      const questions = await h.query<{ id: string }>(sql`select id from questions`);
      expect(questions.map((q) => q.id)).toEqual(['old-open']);
    } finally {
      await peer.stop();
    }
  });
});
