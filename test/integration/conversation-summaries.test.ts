import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { SUMMARY_NOTE } from '../../src/agent/history-window.ts';
import { createConversationSummaries } from '../../src/jobs/conversation-summaries.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;
let summaries = 0;
const BUDGET = { maxMessages: 20, maxChars: 6_000 };

beforeAll(async () => {
  h = await startHarness({ app: { history: BUDGET } });
  h.fake.setSummaries(() => ({ text: `summary number ${++summaries}` }));
  h.fake.setDefault((req) => ({ text: `reply to ${req.lastUserText}`.padEnd(120, '.') }));
});
afterAll(async () => {
  await h?.stop();
});

const ID = 'testy:chat:u1';

async function summaryJobsSettled() {
  await until(async () => {
    const [row] = await h.query<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'conversation-summary' and state in ('created', 'retry', 'active')`);
    return row.n === 0;
  });
}

/** A summaries service that only asks (the app's own writes the summaries). */
function askingService() {
  return createConversationSummaries({
    database: h.app.database,
    jobs: h.app.jobs,
    model: { provider: 'none', complete: () => Promise.reject(new Error('not called')) },
    defaultModel: 'fake-model',
    personas: () => h.app.personas,
    budget: BUDGET,
    log: pino({ level: 'silent' }),
    worker: false,
  });
}

/** One message and its reply; then the summary it asked for, if any, is written before the next. */
async function exchange(text: string) {
  const before = h.chat.sent.length;
  await h.chat.inject({ text });
  await h.chat.waitForSent(before + 1);
  await h.app.waitForIdle(ID);
  await summaryJobsSettled();
}

describe('a conversation longer than its window', () => {
  it('moves its window in steps, summarised once per step, and the next turns carry the summary', async () => {
    for (let i = 0; i < 30; i++) await exchange(`message ${i} `.padEnd(100, 'x'));
    const turns = h.fake.requests.map((r) => r.body.messages.slice(1) as { role: string; content: string }[]);
    // Each request holds the one before it, with the reply and the new message added; except at a step.
    let steps = 0;
    for (let i = 1; i < turns.length; i++) {
      const previous = JSON.stringify(turns[i - 1]).slice(0, -1);
      if (!JSON.stringify(turns[i]).startsWith(previous)) {
        steps++;
        // At a step the window starts with the newest summary, written from what left it.
        expect(turns[i][0].content).toBe(`${SUMMARY_NOTE}\nsummary number ${steps}`);
      }
    }
    const summaryRequests = h.fake.summaries;
    expect(steps).toBeGreaterThanOrEqual(3);
    expect(steps).toBeLessThanOrEqual(10);
    // Exactly one summary per step: not one per turn.
    expect(summaryRequests).toHaveLength(steps);
    const [jobs] = await h.query<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'conversation-summary'`);
    expect(jobs.n).toBe(steps);
    // Each extends the one before: the second is made from the first and what followed it.
    expect(summaryRequests[1].lastUserText).toContain('Summary so far:\nsummary number 1');
    expect(summaryRequests[1].lastUserText).toContain('User: message ');
    // Every turn's request stays within the budget, and the newest turn carries the latest summary.
    for (const t of turns) expect(t.length).toBeLessThanOrEqual(BUDGET.maxMessages);
    expect(turns.at(-1)![0].content).toBe(`${SUMMARY_NOTE}\nsummary number ${steps}`);
    const [stored] = await h.query<{ summary: string }>(sql`select summary from conversation_summaries where conversation_id = ${ID}`);
    expect(stored.summary).toBe(`summary number ${steps}`);
  });

  it('/new starts afresh: the summary is gone from the table and from the next request', async () => {
    await h.chat.inject({ text: '/new' });
    await until(async () => (await h.query(sql`select 1 from conversation_summaries where conversation_id = ${ID}`)).length === 0);
    h.fake.reset();
    h.fake.setDefault(() => ({ text: 'fresh' }));
    await exchange('hello again');
    expect(h.fake.requests).toHaveLength(1);
    expect(h.fake.requests[0].body.messages.slice(1)).toEqual([{ role: 'user', content: 'hello again' }]);
  });

  it('asking twice for the summary of the same step makes one job', async () => {
    const service = askingService();
    const step = { persona: 'testy', conversationId: 'testy:chat:u2', throughMessageId: 123_456_789 };
    await service.request(step);
    await service.request(step);
    const rows = await h.query<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'conversation-summary' and data->>'conversationId' = 'testy:chat:u2'`);
    expect(rows[0].n).toBe(1);
  });

  it("asks once for a step whose summary is not written yet, however many turns find it", async () => {
    // The summaries fail (the job waits to be tried again), so every turn after the step finds the same step.
    h.fake.setSummaries(() => ({ text: '' }));
    const send = vi.spyOn(h.app.jobs, 'send');
    try {
      // The other person allowed; the ask of the test before is for a step far past this conversation's.
      const chat = { id: 'u2', type: 'dm' as const };
      for (let i = 0; i < 14; i++) {
        const before = h.chat.sent.length;
        await h.chat.inject({ text: `later ${i}`, chat, sender: { id: 'u2', name: 'Ana' } });
        await h.chat.waitForSent(before + 1);
        await h.app.waitForIdle('testy:chat:u2');
      }
      const asked = send.mock.calls.filter(([queue]) => queue === 'conversation-summary').map(([, data]) => (data as { throughMessageId: number }).throughMessageId);
      const [jobs] = await h.query<{ n: number }>(
        sql`select count(*)::int as n from pgboss.job where name = 'conversation-summary' and data->>'conversationId' = 'testy:chat:u2' and (data->>'throughMessageId')::bigint < 123456789`,
      );
      // 28 messages past a window of 19: a step after 16, and turns after it that find it while its summary fails.
      expect(asked.length).toBeGreaterThan(0);
      expect(new Set(asked).size).toBe(asked.length);
      expect(jobs.n).toBe(asked.length);
    } finally {
      send.mockRestore();
      h.fake.setSummaries(() => ({ text: `summary number ${++summaries}` }));
      // Its failed summaries would be tried again during the tests that follow.
      await h.query(sql`delete from pgboss.job where name = 'conversation-summary' and data->>'conversationId' = 'testy:chat:u2'`);
    }
  });

  /** Summaries that take a while, counted while they run: all of them, and by conversation (read from what they summarise). */
  function slowSummaries() {
    const running = new Map<string, number>();
    const most = new Map<string, number>();
    const starts: string[] = [];
    let n = 0;
    h.fake.setSummaries(async (req) => {
      const counted = ['all', /User: later /.test(req.lastUserText) ? 'u2' : 'u1'];
      for (const key of counted) {
        running.set(key, (running.get(key) ?? 0) + 1);
        most.set(key, Math.max(most.get(key) ?? 0, running.get(key)!));
      }
      starts.push(req.lastUserText.split('\n').slice(0, 2).join(' '));
      await new Promise((r) => setTimeout(r, 300));
      for (const key of counted) running.set(key, running.get(key)! - 1);
      return { text: `slow summary ${++n}` };
    });
    return { most, starts };
  }

  it("writes several conversations' summaries at once, and one conversation's one after the other, each extending the last", async () => {
    const slow = slowSummaries();
    try {
      const service = askingService();
      // Steps far past the conversations' messages: each is summarised from what there is.
      for (let i = 1; i <= 3; i++) await service.request({ persona: 'testy', conversationId: ID, throughMessageId: 900_000_000 + i });
      await service.request({ persona: 'testy', conversationId: 'testy:chat:u2', throughMessageId: 900_000_001 });
      await summaryJobsSettled();
      expect(slow.most.get('all')).toBeGreaterThanOrEqual(2);
      expect(slow.most.get('u1')).toBe(1);
      // u1's three steps: the first from the summary it had, each next from the one before it.
      const [stored] = await h.query<{ through: number }>(sql`select through_message_id::int as through from conversation_summaries where conversation_id = ${ID}`);
      expect(stored.through).toBe(900_000_003);
      const firsts = slow.starts.filter((line) => line.startsWith('Summary so far:'));
      expect(new Set(firsts).size).toBe(firsts.length);
    } finally {
      h.fake.setSummaries(() => ({ text: `summary number ${++summaries}` }));
    }
  });
});
