// Reminders and wake-ups end to end: the model schedules them with its tools in a user turn, pg-boss fires them,
// and the fired turn answers with reply_to_origin. Real Postgres and pg-boss, the fake model, a recording chat.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import type { FakeHandler, RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function toolResult(req: RecordedRequest): string {
  return (req.body.messages as { role: string; content: string }[]).findLast((m) => m.role === 'tool')?.content ?? '';
}

/** Fired turns answer at once: their prompt goes back to the chat with reply_to_origin, and the turn ends. */
const firedTurns: FakeHandler = (req) =>
  /^\[(reminder|wake-up)/.test(req.lastUserText)
    ? {
        toolCalls: [
          { name: 'reply_to_origin', arguments: { text: `⏰ ${req.lastUserText}` } },
          { name: 'end_task', arguments: { status: 'ok' } },
        ],
      }
    : { text: `echo: ${req.lastUserText}` };

/** The user asks; the model calls `tool` with `args`, then says what the tool answered. */
async function ask(tool: string, args: Record<string, unknown>, chat = 'u1'): Promise<string> {
  return askIn({ chat: { id: chat, type: 'dm' }, sender: { id: chat, name: 'Ana' } }, tool, args);
}

/** The same, from `sender` in `chat` (a group, say). */
async function askIn(where: { chat: { id: string; type: 'dm' | 'group' }; sender: { id: string; name: string } }, tool: string, args: Record<string, unknown>) {
  h.fake.script({ toolCalls: [{ name: tool, arguments: args }] }, (req) => ({ text: `tool said: ${toolResult(req)}` }));
  const before = h.chat.sent.length;
  await h.chat.inject({ text: `please ${tool}`, ...where });
  const sent = await h.chat.waitForSent(before + 1);
  return sent[before].text;
}

/** The scheduling Ana's DM turns get (for repeats faster than the tools allow, which only tests need). */
const scheduling = () =>
  h.app.scheduler.forTurn({ persona: h.app.personas[0], conversationId: 'testy:chat:u1', origin: { connector: 'chat', chat: 'u1', chatType: 'dm', sender: 'chat:u1' } });

const fired = () => h.chat.sent.filter((m) => m.text.startsWith('⏰'));

async function waitForFired(n: number, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (fired().length < n) {
    if (Date.now() > deadline) throw new Error(`expected ${n} fired messages, got ${JSON.stringify(fired().map((m) => m.text))}`);
    await sleep(25);
  }
  return fired();
}

beforeAll(async () => {
  h = await startHarness({ app: { tools: createBuiltinTools({ timezone: 'UTC' }) } });
});
afterAll(() => h?.stop());
beforeEach(async () => {
  h.fake.reset();
  h.fake.setDefault(firedTurns);
  h.chat.sent.length = 0;
  await h.query(sql`update reminders set status = 'cancelled' where status = 'pending'`);
});

describe('remind', () => {
  it('the same tool call run again (a turn resumed after a crash) sets nothing more, fired or not', async () => {
    const api = scheduling();
    const first = await api.remind({ name: 'again', prompt: 'stand up', dueAt: new Date(Date.now() + 1000), callKey: 'turn-1/call_0/abc' });
    await waitForFired(1);
    // Run again after it fired, asking for another name: the reminder the call set is the answer, and nothing fires.
    const again = await api.remind({ name: 'again-2', prompt: 'stand up', dueAt: new Date(Date.now() + 1000), callKey: 'turn-1/call_0/abc' });
    expect(again.name).toBe(first.name);
    await sleep(2000);
    expect(fired()).toHaveLength(1);
  });

  it('the same call id in two turns sets two reminders (some servers number calls afresh in every response)', async () => {
    for (const n of [1, 2]) {
      h.fake.script({ toolCalls: [{ id: 'call_0', name: 'remind', arguments: { action: 'remind', name: `numbered-${n}`, prompt: 'x', in_seconds: 3600 } }] }, (req) => ({
        text: `tool said: ${toolResult(req)}`,
      }));
      const before = h.chat.sent.length;
      await h.chat.inject({ text: 'please remind', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1', name: 'Ana' } });
      const [said] = (await h.chat.waitForSent(before + 1)).slice(before);
      expect(said.text).toMatch(new RegExp(`^tool said: reminder "numbered-${n}" set`));
    }
    const rows = await h.query<{ call_id: string }>(sql`select call_id from reminders where name like 'numbered-%' order by name`);
    expect(rows.map((r) => r.call_id)).toEqual([expect.stringMatching(/^[0-9a-f-]{36}\/call_0\//), expect.stringMatching(/^[0-9a-f-]{36}\/call_0\//)]);
  });

  it('the same call id in two responses of one turn sets two reminders', async () => {
    const call = (n: number) => ({ toolCalls: [{ id: 'call_0', name: 'remind', arguments: { action: 'remind', name: `step-${n}`, prompt: 'x', in_seconds: 3600 } }] });
    h.fake.script(call(1), call(2), { text: 'both set' });
    const before = h.chat.sent.length;
    await h.chat.inject({ text: 'please remind twice', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1', name: 'Ana' } });
    await h.chat.waitForSent(before + 1);
    const rows = await h.query<{ name: string }>(sql`select name from reminders where name like 'step-%' order by name`);
    expect(rows.map((r) => r.name)).toEqual(['step-1', 'step-2']);
  });

  it('a reminder 2 s ahead fires once, in the chat that asked, through reply_to_origin', async () => {
    const said = await ask('remind', { action: 'remind', prompt: 'Remind Ana to call Sam', in_seconds: 2 });
    expect(said).toMatch(/^tool said: reminder "ana-call-sam" set: next at /);
    const started = Date.now();
    const [message] = await waitForFired(1);
    expect(Date.now() - started).toBeGreaterThan(1000);
    expect(message.text).toBe('⏰ [reminder "ana-call-sam"] Remind Ana to call Sam');
    expect(message.chat).toBe('u1');
    await sleep(1500);
    expect(fired()).toHaveLength(1);
    const [row] = await h.query<{ status: string; fires: number }>(sql`select status, fires from reminders where name = 'ana-call-sam'`);
    expect(row).toEqual({ status: 'done', fires: 1 });
  });

  it('a recurring reminder fires the right number of times and stops at until', async () => {
    const until = new Date(Date.now() + 1000 + 2 * 1000 + 500);
    const view = await scheduling().remind({ name: 'tick', prompt: 'tick', dueAt: new Date(Date.now() + 1000), everySeconds: 1, until });
    expect(view).toMatchObject({ everySeconds: 1, until: until.toISOString() });
    await waitForFired(3);
    await sleep(2000);
    expect(fired().map((m) => m.text)).toEqual(Array(3).fill('⏰ [reminder "tick"] tick'));
    const [row] = await h.query<{ status: string; fires: number }>(sql`select status, fires from reminders where name = 'tick'`);
    expect(row).toEqual({ status: 'done', fires: 3 });
  });

  it('cancel_reminder stops a recurring reminder', async () => {
    await scheduling().remind({ name: 'nag', prompt: 'nag', dueAt: new Date(Date.now() + 1000), everySeconds: 1 });
    await waitForFired(1);
    expect(await ask('remind', { action: 'cancel_reminder', name: 'nag' })).toBe('tool said: reminder "nag" cancelled');
    const count = fired().length;
    await sleep(2500);
    expect(fired().length).toBe(count);
    expect(await ask('remind', { action: 'cancel_reminder', name: 'nag' })).toMatch(/error: there is no pending reminder named "nag"/);
  });

  it('refuses a time in the past, and a second pending reminder with the same name (in the database too)', async () => {
    const past = new Date(Date.now() - 60_000).toISOString();
    expect(await ask('remind', { action: 'remind', name: 'late', prompt: 'x', at: past })).toMatch(/error: at .* is in the past/);
    expect(await ask('remind', { action: 'remind', name: 'dentist', prompt: 'dentist', in_seconds: 3600 })).toMatch(/reminder "dentist" set/);
    expect(await ask('remind', { action: 'remind', name: 'dentist', prompt: 'again', in_seconds: 7200 })).toMatch(
      /error: a pending reminder named "dentist" exists already/,
    );
    // The database itself refuses it, whatever the code in front of it does.
    await expect(
      h.query(sql`insert into reminders (id, persona, name, kind, conversation_id, prompt, due_at) values (gen_random_uuid(), 'testy', 'dentist', 'reminder', 'c', 'p', now())`),
    ).rejects.toThrow();
    const rows = await h.query<{ n: number }>(sql`select count(*)::int as n from reminders where name = 'dentist' and status = 'pending'`);
    expect(rows[0].n).toBe(1);
  });

  it('a naive time is in PARLOR_TIMEZONE; an unparsable one is refused with an example', async () => {
    const year = new Date().getUTCFullYear() + 1;
    expect(await ask('remind', { action: 'remind', name: 'naive', prompt: 'x', at: `${year}-01-02T09:00` })).toMatch(new RegExp(`next at ${year}-01-02 09:00:00 UTC`));
    expect(await ask('remind', { action: 'remind', name: 'far', prompt: 'x', at: '2099-01-02T09:00' })).toMatch(/error: at .* is more than 10 years ahead/);
    expect(await ask('remind', { action: 'remind', name: 'bad', prompt: 'x', at: 'tomorrow at nine' })).toMatch(/error: at "tomorrow at nine" is not an ISO 8601 time/);
  });

  it('list shows pending reminders with their next time', async () => {
    await ask('remind', { action: 'remind', name: 'later', prompt: 'later on', in_seconds: 3600 });
    const listed = await ask('remind', { action: 'list' });
    expect(listed).toMatch(/Pending reminders:\n- later: next at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC — "later on"/);
  });
});

describe('schedule_wakeup', () => {
  it('fires once after the delay; a second call replaces the first', async () => {
    expect(await ask('schedule_wakeup', { time: '1h', message: 'first' })).toMatch(/^tool said: wake-up set for /);
    expect(await ask('schedule_wakeup', { time: '1s', message: 'second' })).toMatch(/it replaces the earlier one/);
    const [message] = await waitForFired(1);
    expect(message.text).toBe('⏰ [wake-up] second');
    await sleep(1500);
    expect(fired()).toHaveLength(1);
  });

  it('"0" cancels it', async () => {
    await ask('schedule_wakeup', { time: '2s', message: 'never' });
    expect(await ask('schedule_wakeup', { time: '0' })).toBe('tool said: wake-up cancelled');
    await sleep(3000);
    expect(fired()).toHaveLength(0);
    expect(await ask('schedule_wakeup', { time: '0' })).toBe('tool said: ok: there was no wake-up to cancel');
  });

  it('loop re-arms after each firing until cancelled', async () => {
    await scheduling().wakeup({ delayMs: 1000, message: 'again', loop: true });
    await waitForFired(3, 8000);
    await ask('schedule_wakeup', { time: '0' });
    const count = fired().length;
    await sleep(2500);
    expect(fired().length).toBe(count);
  });

  it('refuses a time it cannot read', async () => {
    expect(await ask('schedule_wakeup', { time: 'soonish' })).toMatch(/error: time "soonish" is not a duration/);
  });
});

describe('reply_to_origin', () => {
  it('sends at most one message per turn; a second call is skipped with ok', async () => {
    const afterTools = (req: RecordedRequest) => (req.body.messages as { role: string }[]).at(-1)!.role === 'tool';
    h.fake.setDefault((req) =>
      /^\[reminder/.test(req.lastUserText) && !afterTools(req)
        ? {
            toolCalls: [
              { name: 'reply_to_origin', arguments: { text: '⏰ once' } },
              { name: 'reply_to_origin', arguments: { text: '⏰ twice' } },
            ],
          }
        : /^\[reminder/.test(req.lastUserText)
          ? { toolCalls: [{ name: 'end_task', arguments: { status: 'ok', summary: toolResult(req) } }] }
          : { text: `echo: ${req.lastUserText}` },
    );
    await ask('remind', { action: 'remind', name: 'double', prompt: 'x', in_seconds: 1 });
    await waitForFired(1);
    await sleep(1000);
    // The two calls run side by side: whichever is first goes out, the other is skipped.
    expect(fired()).toHaveLength(1);
    expect(['⏰ once', '⏰ twice']).toContain(fired()[0].text);
    const tools = h.fake.requests.flatMap((r) => (r.body.messages as { role: string; content: string }[]).filter((m) => m.role === 'tool').map((m) => m.content));
    expect(tools).toContain('ok: your reply already went to chat:u1 in this turn; not sent again');
  });

  it('goes to deliver_to when the reminder named one', async () => {
    await ask('remind', { action: 'remind', name: 'elsewhere', prompt: 'x', in_seconds: 1, deliver_connector: 'chat', deliver_to: 'u2' });
    const [message] = await waitForFired(1);
    expect(message.chat).toBe('u2');
  });
});

describe('across restarts and processes', () => {
  it('a reminder due while Parlor is down fires once when it is back, marked as late', async () => {
    await ask('remind', { action: 'remind', name: 'while-down', prompt: 'water the plants', in_seconds: 5 });
    // Stop the app's workers (as if it were down) before it is due, let the time pass, and pretend it was due two
    // hours ago.
    await h.app.scheduler.stop();
    const peer = await h.startPeer({ worker: false });
    await h.query(sql`update reminders set due_at = now() - interval '2 hours' where name = 'while-down'`);
    await sleep(1500);
    expect(fired()).toHaveLength(0);
    const worker = await h.startPeer({ connectors: () => [], remoteConnectors: ['chat'] });
    try {
      const [message] = await waitForFired(1);
      expect(message.text).toMatch(/^⏰ \[reminder "while-down"\] water the plants\n\(late: this was due at .* UTC and fires 2 h 0 min late, because Parlor was not running then\)$/);
      await sleep(1500);
      expect(fired()).toHaveLength(1);
    } finally {
      await worker.stop();
      await peer.stop();
      await h.app.scheduler.start();
    }
  });

  it('a restart between scheduling and the due time: it still fires exactly once', async () => {
    await ask('remind', { action: 'remind', name: 'restart', prompt: 'after restart', in_seconds: 3 });
    await h.app.scheduler.stop();
    await h.app.scheduler.start();
    await waitForFired(1);
    await sleep(1500);
    expect(fired()).toHaveLength(1);
  });

  it('two processes on one database: each reminder fires once', async () => {
    const peers: App[] = [await h.startPeer(), await h.startPeer()];
    try {
      const persona = h.app.personas[0];
      const scheduling = h.app.scheduler.forTurn({ persona, conversationId: 'testy:chat:u1', origin: { connector: 'chat', chat: 'u1' } });
      const dueAt = new Date(Date.now() + 1500);
      for (let i = 0; i < 10; i++) await scheduling.remind({ name: `both-${i}`, prompt: `r${i}`, dueAt });
      // Reminders of one chat that fall due together may share a turn: each prompt is answered once, in some message.
      const prompts = Array.from({ length: 10 }, (_, i) => `[reminder "both-${i}"] r${i}`);
      const answered = () => fired().flatMap((m) => prompts.filter((p) => m.text.includes(p)));
      await until(() => answered().length >= 10, 'every reminder answered', 30_000);
      await sleep(2000);
      expect(answered().sort()).toEqual(prompts.sort());
    } finally {
      for (const peer of peers) await peer.stop();
    }
  });

  it('a firing job delivered twice posts once', async () => {
    await ask('remind', { action: 'remind', name: 'redelivered', prompt: 'only once', in_seconds: 1 });
    await waitForFired(1);
    const [row] = await h.query<{ id: string }>(sql`select id from reminders where name = 'redelivered'`);
    // The same firing again, as pg-boss would hand it out after a crash before the job was marked complete.
    await h.app.jobs.boss.send(QUEUES.reminder, { reminderId: row.id, fire: 0 });
    await sleep(2000);
    expect(fired().map((m) => m.text)).toEqual(['⏰ [reminder "redelivered"] only once']);
  });

  it('a pending reminder whose job was lost is given a new one by housekeeping, and fires once', async () => {
    await h.query(sql`
      insert into reminders (id, persona, name, kind, conversation_id, prompt, origin, due_at)
      values (gen_random_uuid(), 'testy', 'stranded', 'reminder', 'testy:chat:u1', 'found again', '{"connector":"chat","chat":"u1"}'::jsonb, now() - interval '10 minutes')`);
    await h.app.scheduler.housekeeping();
    const [message] = await waitForFired(1);
    expect(message.text).toMatch(/^⏰ \[reminder "stranded"\] found again\n\(late: /);
    await h.app.scheduler.housekeeping();
    await sleep(1500);
    expect(fired()).toHaveLength(1);
  });
});

describe('repeats that outpace their turns', () => {
  it('a repeat whose previous turn has not started yet is skipped, so slow turns never pile up', async () => {
    // A slow user turn holds the conversation; the reminder's turns queue behind it.
    h.fake.script({ text: 'slow answer', delayMs: 3500 });
    await h.chat.inject({ text: 'take your time' });
    await sleep(200);
    await h.app.scheduler
      .forTurn({ persona: h.app.personas[0], conversationId: 'testy:chat:u1', origin: { connector: 'chat', chat: 'u1' } })
      .remind({ name: 'fast-repeat', prompt: 'again', dueAt: new Date(Date.now() + 300), everySeconds: 1, until: new Date(Date.now() + 2800) });
    await h.chat.waitForSent(1, 10_000);
    await sleep(2500);
    // Three occurrences fell due while the first one's turn waited: only that one ran.
    expect(fired().map((m) => m.text)).toEqual(['⏰ [reminder "fast-repeat"] again']);
    const [row] = await h.query<{ fires: number; status: string }>(sql`select fires, status from reminders where name = 'fast-repeat'`);
    expect(row).toEqual({ fires: 3, status: 'done' });
  });

  it('reminders of one chat that fall due while its turn is busy wake one turn, with every prompt, once', async () => {
    const since = new Date().toISOString();
    // The turn is busy until all three have fallen due and fired, however slowly a loaded machine gets there.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    h.fake.script(async () => {
      await held;
      return { text: 'slow answer' };
    });
    await h.chat.inject({ text: 'take your time' });
    await until(() => h.fake.requests.some((r) => r.lastUserText === 'take your time'), 'the slow turn');
    const api = scheduling();
    await api.remind({ name: 'together-a', prompt: 'first', dueAt: new Date(Date.now() + 300) });
    await api.remind({ name: 'together-b', prompt: 'second', dueAt: new Date(Date.now() + 500) });
    await api.remind({ name: 'together-c', prompt: 'third', dueAt: new Date(Date.now() + 700) });
    await until(
      async () => (await h.query<{ n: number }>(sql`select count(*)::int as n from reminders where name like 'together-%' and fires = 1`))[0].n === 3,
      'the three reminders firing',
    );
    release();
    await waitForFired(1);
    await h.app.waitForIdle('testy:chat:u1');
    await sleep(500);
    // One message with the three prompts (in the order they fired: those due in the same moment may fire side by side).
    expect(fired()).toHaveLength(1);
    const parts = fired()[0].text.replace(/^⏰ /, '').split('\n\n');
    expect(parts.sort()).toEqual(['[reminder "together-a"] first', '[reminder "together-b"] second', '[reminder "together-c"] third']);
    // One model call for the three: the slow answer's, then the wake turn's (and its end after the tools).
    const wakes = h.fake.requests.filter((r) => r.lastUserText.startsWith('[reminder'));
    expect(new Set(wakes.map((r) => r.lastUserText)).size).toBe(1);
    const rows = await h.query<{ name: string; fires: number; status: string }>(sql`select name, fires, status from reminders where name like 'together-%' order by name`);
    expect(rows).toEqual(['a', 'b', 'c'].map((x) => ({ name: `together-${x}`, fires: 1, status: 'done' })));
    const turns = await h.query<{ n: number }>(sql`select count(*)::int as n from turns where kind = 'wake' and conversation_id = 'testy:chat:u1' and started_at > ${since}::timestamptz`);
    expect(turns).toEqual([{ n: 1 }]);
  });

  it('refuses an interval or a delay beyond ten years', async () => {
    expect(await ask('remind', { action: 'remind', name: 'huge', prompt: 'x', in_seconds: 60, every_seconds: 1e13 })).toMatch(/invalid_arguments: \/every_seconds must be <= /);
    expect(await ask('remind', { action: 'remind', name: 'huge', prompt: 'x', in_seconds: 9e12 })).toMatch(/invalid_arguments: \/in_seconds must be <= /);
  });
});

describe('limits: reminders cannot buy a model turn every second', () => {
  const group = { id: 'g2', type: 'group' as const };
  const zed = { chat: group, sender: { id: 'z9', name: 'Zed' } };
  const pendingNamed = async (name: string) =>
    (await h.query<{ n: number }>(sql`select count(*)::int as n from reminders where name = ${name} and status = 'pending'`))[0].n;

  it("in a group, someone who is not one of the persona's users cannot set a repeating reminder or a looping wake-up; one-time ones still work", async () => {
    expect(await askIn(zed, 'remind', { action: 'remind', name: 'zed-every', prompt: 'ping', in_seconds: 60, every_seconds: 3600 })).toBe(
      "tool said: error: only the persona's own users can set repeating reminders here; a one-time reminder (without every_seconds) is fine",
    );
    expect(await pendingNamed('zed-every')).toBe(0);
    expect(await askIn(zed, 'schedule_wakeup', { time: '1h', message: 'loop', loop: true })).toBe(
      "tool said: error: only the persona's own users can set a looping wake-up here; without loop it is fine",
    );
    expect(await pendingNamed('wakeup:testy:chat:g2')).toBe(0);

    expect(await askIn(zed, 'remind', { action: 'remind', name: 'zed-once', prompt: 'ping', in_seconds: 3600 })).toMatch(/^tool said: reminder "zed-once" set: next at /);
    expect(await askIn(zed, 'schedule_wakeup', { time: '1h', message: 'once' })).toMatch(/^tool said: wake-up set for /);
    // One of the persona's users, in the same group, may.
    const ana = { chat: group, sender: { id: 'u1', name: 'Ana' } };
    expect(await askIn(ana, 'remind', { action: 'remind', name: 'ana-every', prompt: 'ping', in_seconds: 60, every_seconds: 3600 })).toMatch(
      /^tool said: reminder "ana-every" set: .*every 3600s/,
    );
    expect(await askIn(ana, 'schedule_wakeup', { time: '1h', message: 'loop', loop: true })).toMatch(/it repeats every 1h/);
  });

  it("in a group, someone who is not one of the persona's users sees and cancels only the reminders they set, and holds at most 5", async () => {
    const ana = { chat: group, sender: { id: 'u1', name: 'Ana' } };
    expect(await askIn(zed, 'remind', { action: 'remind', name: 'zed-once', prompt: 'ping', in_seconds: 3600 })).toMatch(/set/);
    expect(await askIn(ana, 'remind', { action: 'remind', name: 'ana-private', prompt: 'call the doctor', in_seconds: 7200 })).toMatch(/set/);
    const listed = await askIn(zed, 'remind', { action: 'list' });
    expect(listed).toContain('zed-once');
    expect(listed).not.toMatch(/ana-private|call the doctor/);
    expect(await askIn(zed, 'remind', { action: 'cancel_reminder', name: 'ana-private' })).toBe('tool said: error: there is no pending reminder named "ana-private"');
    expect(await pendingNamed('ana-private')).toBe(1);
    // Zed has one already (zed-once): four more fit, the sixth does not.
    for (const i of [2, 3, 4, 5]) expect(await askIn(zed, 'remind', { action: 'remind', name: `zed-${i}`, prompt: 'ping', in_seconds: 3600 })).toMatch(/set/);
    expect(await askIn(zed, 'remind', { action: 'remind', name: 'zed-6', prompt: 'ping', in_seconds: 3600 })).toMatch(
      /^tool said: error: chat:z9 has 5 pending reminders here, the most someone who is not one of testy's users may have/,
    );
    expect(await askIn(zed, 'remind', { action: 'cancel_reminder', name: 'zed-5' })).toBe('tool said: reminder "zed-5" cancelled');
    // The persona's own user still sees everything.
    expect(await askIn(ana, 'remind', { action: 'list' })).toMatch(/zed-once[\s\S]*ana-private/);
    await h.query(sql`update reminders set status = 'cancelled' where name like 'zed-%' or name = 'ana-private'`);
  });

  it("a message from someone who is not one of the persona's people, read mid-turn, makes the turn act as them", async () => {
    const ana = { chat: group, sender: { id: 'u1', name: 'Ana' } };
    h.fake.script(
      // Ana's turn is slow to answer: Zed writes meanwhile, and the next model call reads his message.
      { toolCalls: [{ name: 'clock', arguments: {} }], delayMs: 600 },
      { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'zed-forever', prompt: 'ping', in_seconds: 60, every_seconds: 60 } }] },
      (req) => ({ text: `tool said: ${toolResult(req)}` }),
    );
    const before = h.chat.sent.length;
    await h.chat.inject({ text: 'hi', ...ana });
    await sleep(150);
    await h.chat.inject({ text: 'remind us every minute forever', ...zed });
    const sent = await h.chat.waitForSent(before + 1);
    expect(sent[before].text).toBe("tool said: error: only the persona's own users can set repeating reminders here; a one-time reminder (without every_seconds) is fine");
    expect(await pendingNamed('zed-forever')).toBe(0);
    await h.app.waitForIdle('testy:chat:g2');
  });

  it('one-shot wake-ups and reminders cannot be chained into a turn a second: from a scheduled turn or an outsider, the next is at least 60 s away', async () => {
    // A wake turn that tries to set the next wake-up a second away, and a reminder 5 seconds away.
    const tried: string[] = [];
    h.fake.setDefault((req) => {
      if (/^\[wake-up/.test(req.lastUserText)) {
        const last = req.body.messages.at(-1);
        if (last.role === 'tool') {
          tried.push(String(last.content));
          if (tried.length === 1) return { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'next', prompt: 'again', in_seconds: 5 } }] };
          return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
        }
        return { toolCalls: [{ name: 'schedule_wakeup', arguments: { time: '1s', message: 'again' } }] };
      }
      return { text: `echo: ${req.lastUserText}` };
    });
    await scheduling().wakeup({ delayMs: 1000, message: 'go' });
    const deadline = Date.now() + 10_000;
    while (tried.length < 2 && Date.now() < deadline) await sleep(25);
    expect(tried).toEqual([
      'error: set from a scheduled turn, a wake-up is at least 60s away (so wake-ups never chain into a turn every second)',
      'error: set from a scheduled turn, a reminder is at least 60s away (so reminders never chain into a turn every second)',
    ]);
    expect(await pendingNamed('next')).toBe(0);
    expect(await askIn(zed, 'schedule_wakeup', { time: '5s', message: 'x' })).toBe(
      "tool said: error: set by someone who is not one of the persona's users, a wake-up is at least 60s away (so wake-ups never chain into a turn every second)",
    );
    expect(await askIn(zed, 'remind', { action: 'remind', name: 'soon', prompt: 'x', in_seconds: 1 })).toMatch(/a reminder is at least 60s away/);
    // The persona's own users still may.
    expect(await ask('schedule_wakeup', { time: '5s', message: 'soon' })).toMatch(/^tool said: wake-up set for /);
  });

  it("in a shared group, someone who is not one of the persona's users cannot replace or cancel the wake-up its users set", async () => {
    const ana = { chat: group, sender: { id: 'u1', name: 'Ana' } };
    expect(await askIn(ana, 'schedule_wakeup', { time: '2h', message: 'check the deploy' })).toMatch(/^tool said: wake-up set for /);
    const refused = "tool said: error: this conversation's wake-up was set by one of the persona's users; only they can change or cancel it";
    expect(await askIn(zed, 'schedule_wakeup', { time: '0' })).toBe(refused);
    expect(await askIn(zed, 'schedule_wakeup', { time: '3h', message: 'something else' })).toBe(refused);
    const [row] = await h.query<{ prompt: string }>(sql`select prompt from reminders where name = 'wakeup:testy:chat:g2' and status = 'pending'`);
    expect(row.prompt).toBe('check the deploy');
  });

  it('every_seconds below 60, and a looping wake-up more often than once a minute, are refused', async () => {
    for (const every of [1, 59]) {
      expect(await ask('remind', { action: 'remind', name: `fast-${every}`, prompt: 'x', in_seconds: 60, every_seconds: every })).toBe(
        'tool said: error: every_seconds must be at least 60 (a reminder repeats at most once a minute)',
      );
      expect(await pendingNamed(`fast-${every}`)).toBe(0);
    }
    expect(await ask('schedule_wakeup', { time: '30s', message: 'x', loop: true })).toBe(
      'tool said: error: a looping wake-up repeats at most once a minute; give a time of at least 60s',
    );
    expect(await pendingNamed('wakeup:testy:chat:u1')).toBe(0);
    expect(await ask('remind', { action: 'remind', name: 'minutely', prompt: 'x', in_seconds: 60, every_seconds: 60 })).toMatch(/reminder "minutely" set: .*every 60s/);
    expect(await ask('schedule_wakeup', { time: '1m', message: 'x', loop: true })).toMatch(/it repeats every 1m until you cancel it with time "0", at most 1000 times in all$/);
  });

  it('the setter is told when a repeat ends: at its until, or after 1000 firings, whichever is first', async () => {
    const start = Date.now() + 60_000;
    const said = await ask('remind', { action: 'remind', name: 'hourly', prompt: 'x', in_seconds: 60, every_seconds: 3600 });
    const last = /at most 1000 times in all \(the last at (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) UTC\)/.exec(said);
    expect(last, said).not.toBeNull();
    // 999 hours after the first one.
    expect(Math.abs(Date.parse(`${last![1]}T${last![2]}Z`) - (start + 999 * 3600_000))).toBeLessThan(5000);
    const until = new Date(Date.now() + 7 * 24 * 3600_000).toISOString();
    expect(await ask('remind', { action: 'remind', name: 'week', prompt: 'x', in_seconds: 60, every_seconds: 3600, until })).toMatch(/every 3600s until \d{4}-/);
    expect(await ask('remind', { action: 'list' })).toMatch(/- hourly: next at .* every 3600s, at most 1000 times in all \(the last at /);
  });

  it('a repeating reminder ends after 1000 firings, and the turn of the last one is told so', async () => {
    const view = await scheduling().remind({ name: 'forever', prompt: 'tick', dueAt: new Date(Date.now() + 3600_000), everySeconds: 1 });
    expect(view.fires).toBe(0);
    // As if it had fired 998 times already: the next two firings are the last two.
    const [row] = await h.query<{ id: string }>(sql`update reminders set fires = 998, due_at = now() where name = 'forever' and status = 'pending' returning id`);
    await h.app.jobs.boss.send(QUEUES.reminder, { reminderId: row.id, fire: 998 });
    await waitForFired(2);
    await sleep(2500);
    expect(fired().map((m) => m.text)).toEqual([
      '⏰ [reminder "forever"] tick',
      '⏰ [reminder "forever"] tick\n(this is the last time: a repeating reminder fires at most 1000 times; set it again if it should go on)',
    ]);
    const [after] = await h.query<{ status: string; fires: number }>(sql`select status, fires from reminders where id = ${row.id}`);
    expect(after).toEqual({ status: 'done', fires: 1000 });
  });

  it('a looping wake-up ends after 1000 firings too, and says so', async () => {
    await scheduling().wakeup({ delayMs: 3600_000, message: 'loop', loop: true });
    const [row] = await h.query<{ id: string }>(
      sql`update reminders set fires = 999, due_at = now() where name = 'wakeup:testy:chat:u1' and status = 'pending' returning id`,
    );
    await h.app.jobs.boss.send(QUEUES.reminder, { reminderId: row.id, fire: 999 });
    const [message] = await waitForFired(1);
    expect(message.text).toBe(
      '⏰ [wake-up] loop\n(this is the last wake-up of the loop: a loop repeats at most 1000 times; call schedule_wakeup again if it should go on)',
    );
    await sleep(1500);
    expect(fired()).toHaveLength(1);
    expect((await h.query<{ status: string }>(sql`select status from reminders where id = ${row.id}`))[0].status).toBe('done');
  });

  it('a persona may have at most 100 pending reminders (wake-ups not counted); the 101st is refused, also when two race', async () => {
    await h.query(sql`
      insert into reminders (id, persona, name, kind, conversation_id, prompt, due_at)
      select gen_random_uuid(), 'testy', 'filler-' || i, 'reminder', 'testy:chat:u1', 'filler', now() + interval '1 day'
      from generate_series(1, 98) as i`);
    expect(await ask('remind', { action: 'remind', name: 'ninety-nine', prompt: 'x', in_seconds: 3600 })).toMatch(/reminder "ninety-nine" set/);
    // Two at once for the last place: exactly one gets it.
    const raced = await Promise.allSettled(['race-a', 'race-b'].map((name) => scheduling().remind({ name, prompt: 'x', dueAt: new Date(Date.now() + 3600_000) })));
    expect(raced.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect((raced.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toMatchObject({ name: 'TooManyReminders' });

    expect(await ask('remind', { action: 'remind', name: 'one-too-many', prompt: 'x', in_seconds: 3600 })).toBe(
      'tool said: error: testy has 100 pending reminders, the most it may have; cancel_reminder one you no longer need first (list shows them)',
    );
    expect(await pendingNamed('one-too-many')).toBe(0);
    const [count] = await h.query<{ n: number }>(sql`select count(*)::int as n from reminders where persona = 'testy' and kind = 'reminder' and status = 'pending'`);
    expect(count.n).toBe(100);
    // A wake-up is not a reminder: it is still set.
    expect(await ask('schedule_wakeup', { time: '1h', message: 'x' })).toMatch(/^tool said: wake-up set for /);
    // One cancelled makes room for one.
    expect(await ask('remind', { action: 'cancel_reminder', name: 'filler-1' })).toBe('tool said: reminder "filler-1" cancelled');
    expect(await ask('remind', { action: 'remind', name: 'one-too-many', prompt: 'x', in_seconds: 3600 })).toMatch(/reminder "one-too-many" set/);
  });
});
