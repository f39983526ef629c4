// Heartbeat and cron end to end: schedules.jsonc entries become pg-boss schedules on the 'cron' queue, their
// jobs become background turns, and the `remind` tool edits the entries live. Real Postgres and pg-boss, the fake
// model, a recording chat connector.
import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { parse as parseJsonc } from 'jsonc-parser';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../src/connector.ts';
import { stableUuid } from '../../src/jobs/stable-uuid.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import type { FakeHandler, FakeReply, RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


type Message = { role: string; content: unknown };
const messagesOf = (req: RecordedRequest) => req.body.messages as Message[];
const lastMessage = (req: RecordedRequest) => messagesOf(req).at(-1);
const lastToolResult = (req: RecordedRequest) => String(messagesOf(req).findLast((m) => m.role === 'tool')?.content ?? '');
/** Heartbeat and cron turns (their system prompt says nobody reads their text). */
const isBackground = (req: RecordedRequest) => /This is (a heartbeat|the scheduled job)/.test(req.system);

interface TurnRow {
  id: string;
  conversationId: string;
  kind: string;
  status: string;
}

const HEARTBEAT_MD = 'Water the ficus if the soil is dry. (checklist marker 7f3a)';
const TZ = 'Europe/Berlin';

/** Written over the harness's plain JSON after start: the same entries, with comments that edits must keep. */
const SCHEDULES_JSONC = `// Testy's schedules (a comment at the top that must survive edits)
[
  // the nightly look-around
  { "name": "hb", "type": "heartbeat", "cron": "0 3 * * *", "prompt": "Look around" },
  /* weekly digest, to the primary */
  { "name": "digest", "type": "cron", "cron": "0 7 * * 1", "prompt": "Write the digest" },
  { "name": "news", "type": "cron", "cron": "30 6 * * *", "prompt": "Morning news", "fresh": true, "deliver": { "connector": "chat", "to": "u2" } }
]
`;
const INITIAL_ENTRIES = parseJsonc(SCHEDULES_JSONC) as { name: string; cron: string }[];

describe('heartbeat and cron schedules', () => {
  let h: Harness;
  /** What the model does in heartbeat and cron turns; each test sets it. */
  let background: FakeHandler;
  let schedulesFile: string;

  const sent = () => h.chat.sent;
  const texts = () => h.chat.sent.map((m) => m.text);

  /**
   * User turns say `call <tool> <json args>`: the model makes that call, then answers with what the tool said.
   * Background turns go to `background`. Dispatching on the request (not a queue of replies) keeps a background
   * turn that runs alongside a user turn from taking the user turn's scripted answer.
   */
  const model: FakeHandler = (req) => {
    if (isBackground(req)) return background(req);
    if (lastMessage(req)?.role === 'tool') return { text: `tool said: ${lastToolResult(req)}` };
    const call = /call (\S+) (\{.*\})\s*$/s.exec(req.lastUserText);
    if (!call) return { text: `echo: ${req.lastUserText}` };
    return { toolCalls: [{ name: call[1], arguments: JSON.parse(call[2]) as Record<string, unknown> }] };
  };

  /** The user (chat:u1) asks; the model calls `tool`; resolves with what the tool answered. */
  async function ask(tool: string, args: Record<string, unknown>): Promise<string> {
    const before = sent().length;
    await h.chat.inject({ text: `call ${tool} ${JSON.stringify(args)}` });
    const reply = await until(
      () => sent().slice(before).find((m) => m.chat === 'u1' && m.text.startsWith('tool said: ')),
      () => `the answer to ${tool} ${JSON.stringify(args)}; sent: ${JSON.stringify(texts().slice(before))}`,
    );
    return reply.text.slice('tool said: '.length);
  }

  async function finishedTurns(conversationPattern: string): Promise<TurnRow[]> {
    return h.query<TurnRow>(
      sql`select id, conversation_id as "conversationId", kind, status from turns
          where conversation_id like ${conversationPattern} and ended_at is not null order by started_at, id`,
    );
  }

  /** Resolves with the first turn in conversations like `pattern` that finishes after `known` (the turns seen before). */
  async function nextFinishedTurn(pattern: string, known: TurnRow[], timeoutMs = 10_000): Promise<TurnRow> {
    const seen = new Set(known.map((t) => t.id));
    return until(async () => (await finishedTurns(pattern)).find((t) => !seen.has(t.id)), `a turn in ${pattern} to finish`, timeoutMs);
  }

  async function messageCount(where: { conversationId?: string; turnId?: string }): Promise<number> {
    const [row] = where.turnId
      ? await h.query<{ n: number }>(sql`select count(*)::int as n from messages where turn_id = ${where.turnId}`)
      : await h.query<{ n: number }>(sql`select count(*)::int as n from messages where conversation_id = ${where.conversationId}`);
    return row.n;
  }

  /** Sends a job to the 'cron' queue as pg-boss's schedule does, and waits until the scheduler has handled it. */
  async function fireCronJob(name: string): Promise<string> {
    const id = await h.app.jobs.boss.send(QUEUES.cron, { persona: 'testy', name });
    expect(id).toBeTruthy();
    await until(async () => {
      const [job] = await h.app.jobs.boss.findJobs(QUEUES.cron, { id: id! });
      return job?.state === 'completed';
    }, `cron job ${id} to complete`);
    return id!;
  }

  const cronSchedules = async () =>
    (await h.app.jobs.boss.getSchedules(QUEUES.cron)).map((s) => ({ key: s.key, cron: s.cron, timezone: s.timezone })).sort((a, b) => a.key.localeCompare(b.key));

  const persona = () => h.app.personas.find((p) => p.name === 'testy')!;
  const schedulingApi = () => h.app.scheduler.forTurn({ persona: persona(), conversationId: 'testy:test-driver' });

  beforeAll(async () => {
    h = await startHarness({
      personas: { testy: { ...TEST_PERSONA, heartbeat: HEARTBEAT_MD, schedules: INITIAL_ENTRIES } },
      env: { PARLOR_TIMEZONE: TZ },
      app: { tools: createBuiltinTools({ timezone: TZ }) },
    });
    schedulesFile = path.join(h.personasDir, 'testy', 'schedules.jsonc');
    await fs.writeFile(schedulesFile, SCHEDULES_JSONC);
  });
  afterAll(() => h?.stop());
  beforeEach(() => {
    h.fake.reset();
    h.fake.setDefault(model);
    background = () => ({ toolCalls: [{ name: 'end_task', arguments: { status: 'skipped' } }] });
    h.chat.sent.length = 0;
  });

  it('start-up turns every entry into a pg-boss schedule keyed <persona>/<name>, in PARLOR_TIMEZONE', async () => {
    expect(await cronSchedules()).toEqual([
      { key: 'testy/digest', cron: '0 7 * * 1', timezone: TZ },
      { key: 'testy/hb', cron: '0 3 * * *', timezone: TZ },
      { key: 'testy/news', cron: '30 6 * * *', timezone: TZ },
    ]);
  });

  describe('heartbeat turns', () => {
    it('a heartbeat that ends skipped leaves no messages and sends nothing', async () => {
      // It looks at the clock first (so the turn writes assistant and tool messages), then has nothing to say.
      background = (req) =>
        lastMessage(req)?.role === 'tool'
          ? { text: 'Nothing to do right now.', toolCalls: [{ name: 'end_task', arguments: { status: 'skipped', summary: 'all quiet' } }] }
          : { toolCalls: [{ name: 'clock', arguments: {} }] };
      const known = await finishedTurns('testy:heartbeat');
      const messagesBefore = await messageCount({ conversationId: 'testy:heartbeat' });
      await fireCronJob('hb');
      const turn = await nextFinishedTurn('testy:heartbeat', known);
      expect(turn).toMatchObject({ conversationId: 'testy:heartbeat', kind: 'heartbeat', status: 'skipped' });
      expect(h.fake.requests.filter(isBackground)).toHaveLength(2);
      expect(await messageCount({ turnId: turn.id })).toBe(0);
      expect(await messageCount({ conversationId: 'testy:heartbeat' })).toBe(messagesBefore);
      await sleep(300);
      expect(sent()).toEqual([]);
      const outbound = await h.query(sql`select id from outbound_messages where turn_id = ${turn.id}`);
      expect(outbound).toEqual([]);
    });

    it('a heartbeat that calls send_message without a target reaches the primary, with HEARTBEAT.md in its prompt', async () => {
      background = () => ({
        toolCalls: [
          { name: 'send_message', arguments: { text: 'The ficus needs water.' } },
          { name: 'end_task', arguments: { status: 'ok' } },
        ],
      });
      const known = await finishedTurns('testy:heartbeat');
      await schedulingApi().runNow('hb');
      const turn = await nextFinishedTurn('testy:heartbeat', known);
      expect(turn).toMatchObject({ kind: 'heartbeat', status: 'ok' });
      expect(sent().map((m) => ({ chat: m.chat, text: m.text }))).toEqual([{ chat: 'u1', text: 'The ficus needs water.' }]);
      const [req] = h.fake.requests.filter(isBackground);
      expect(req.system).toContain(HEARTBEAT_MD);
      expect(req.system).toContain('a heartbeat');
      expect(req.lastUserText).toBe('[heartbeat "hb"] Look around');
      // The turn is kept (status ok): its prompt and the model's calls are in the heartbeat conversation.
      expect(await messageCount({ turnId: turn.id })).toBeGreaterThan(0);
    });

    it('a heartbeat that fails posts one short warning to the primary, and nothing internal reaches the chat', async () => {
      // First plain text (which reaches no one); when told to classify itself, it says failed.
      background = (req) =>
        req.lastUserText.startsWith('[Parlor]')
          ? { text: 'tool trace: clock() -> 03:00. Nothing to do.', toolCalls: [{ name: 'end_task', arguments: { status: 'failed', summary: 'soil sensor unreachable' } }] }
          : { text: 'Nothing to do. [calling clock tool]' };
      const known = await finishedTurns('testy:heartbeat');
      await fireCronJob('hb');
      const turn = await nextFinishedTurn('testy:heartbeat', known);
      expect(turn).toMatchObject({ kind: 'heartbeat', status: 'failed' });
      await until(() => sent().length >= 1, 'the failure warning');
      await sleep(300);
      expect(sent()).toHaveLength(1);
      const [warning] = sent();
      expect(warning.chat).toBe('u1');
      expect(warning.text.startsWith('⚠️')).toBe(true);
      expect(warning.text).toBe('⚠️ testy: a heartbeat turn failed.');
      for (const text of texts()) {
        expect(text).not.toMatch(/nothing to do|tool trace|clock|end_task|sensor/i);
        expect(text.length).toBeLessThan(200);
      }
    });

    it('a heartbeat whose model call fails posts a short warning, not the raw error', async () => {
      background = () => ({ status: 500, text: `upstream exploded: stack trace at internal/llm-gateway.js:12 ${'x'.repeat(600)}` });
      const known = await finishedTurns('testy:heartbeat');
      await fireCronJob('hb');
      expect(await nextFinishedTurn('testy:heartbeat', known, 15_000)).toMatchObject({ kind: 'heartbeat', status: 'failed' });
      await until(() => sent().length >= 1, 'the failure warning');
      await sleep(300);
      expect(sent()).toHaveLength(1);
      const [warning] = sent();
      expect(warning.chat).toBe('u1');
      expect(warning.text.startsWith('⚠️ testy: a heartbeat turn failed')).toBe(true);
      expect(warning.text).not.toContain('stack trace');
      expect(warning.text.length).toBeLessThan(200);
    });
  });

  describe('remind: add, update, remove', () => {
    it('add writes schedules.jsonc (keeping its comments) and creates the pg-boss schedule without a restart; update and remove follow', async () => {
      const added = await ask('remind', { action: 'add', name: 'briefing', type: 'cron', cron: '0 8 * * *', prompt: 'Morning briefing: weather and calendar' });
      expect(added).toMatch(/^added: briefing \(cron, "0 8 \* \* \*", next at \d{4}-\d\d-\d\d 08:00:00 /);
      let text = await fs.readFile(schedulesFile, 'utf8');
      for (const comment of ["// Testy's schedules", '// the nightly look-around', '/* weekly digest, to the primary */']) expect(text).toContain(comment);
      let entries = parseJsonc(text) as { name: string; type: string; cron: string; prompt: string }[];
      expect(entries.map((e) => e.name)).toEqual(['hb', 'digest', 'news', 'briefing']);
      expect(entries[3]).toEqual({ name: 'briefing', type: 'cron', cron: '0 8 * * *', prompt: 'Morning briefing: weather and calendar' });
      expect((await cronSchedules()).find((s) => s.key === 'testy/briefing')).toEqual({ key: 'testy/briefing', cron: '0 8 * * *', timezone: TZ });

      const updated = await ask('remind', { action: 'update', name: 'briefing', cron: '30 9 * * 1-5' });
      expect(updated).toMatch(/^updated: briefing \(cron, "30 9 \* \* 1-5", next at \d{4}-\d\d-\d\d 09:30:00 /);
      text = await fs.readFile(schedulesFile, 'utf8');
      expect(text).toContain('// the nightly look-around');
      entries = parseJsonc(text) as typeof entries;
      expect(entries.find((e) => e.name === 'briefing')).toMatchObject({ cron: '30 9 * * 1-5', prompt: 'Morning briefing: weather and calendar' });
      expect((await cronSchedules()).find((s) => s.key === 'testy/briefing')).toEqual({ key: 'testy/briefing', cron: '30 9 * * 1-5', timezone: TZ });

      expect(await ask('remind', { action: 'remove', name: 'briefing' })).toBe('removed schedule "briefing"');
      text = await fs.readFile(schedulesFile, 'utf8');
      expect(text).toContain('// the nightly look-around');
      expect((parseJsonc(text) as typeof entries).map((e) => e.name)).toEqual(['hb', 'digest', 'news']);
      expect((await cronSchedules()).map((s) => s.key)).toEqual(['testy/digest', 'testy/hb', 'testy/news']);
      expect(await ask('remind', { action: 'remove', name: 'briefing' })).toMatch(/^error: there is no schedule named "briefing"; existing: hb, digest, news/);
    });

    it('update enabled:false takes the entry off pg-boss and its firings run nothing; enabled:true puts it back', async () => {
      background = () => ({ toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] });
      expect(await ask('remind', { action: 'update', name: 'digest', enabled: false })).toBe('updated: digest (cron, "0 7 * * 1", disabled) — "Write the digest"');
      expect((await cronSchedules()).map((s) => s.key)).toEqual(['testy/hb', 'testy/news']);
      expect(await ask('remind', { action: 'list' })).toContain('- digest (cron, "0 7 * * 1", disabled) — "Write the digest"');
      const jobId = await fireCronJob('digest');
      expect(await h.app.jobs.boss.findJobs(QUEUES.turn, { id: stableUuid(`cron-turn:${jobId}`) })).toEqual([]);

      expect(await ask('remind', { action: 'update', name: 'digest', enabled: true })).toMatch(/^updated: digest \(cron, "0 7 \* \* 1", next at /);
      expect((await cronSchedules()).find((s) => s.key === 'testy/digest')).toEqual({ key: 'testy/digest', cron: '0 7 * * 1', timezone: TZ });
      expect(h.fake.requests.filter(isBackground)).toEqual([]);
    });

    it('an invalid cron expression is refused with the reason, and changes neither the file nor the schedules', async () => {
      const fileBefore = await fs.readFile(schedulesFile, 'utf8');
      const schedulesBefore = await cronSchedules();

      const outOfRange = await ask('remind', { action: 'add', name: 'bad', type: 'cron', cron: '61 * * * *', prompt: 'x' });
      expect(outOfRange).toMatch(/^error: .*cron "61 \* \* \* \*" is not a valid cron expression \(.+\)/);
      const fourFields = await ask('remind', { action: 'add', name: 'bad', type: 'heartbeat', cron: '0 8 * *', prompt: 'x' });
      expect(fourFields).toMatch(/^error: .*cron "0 8 \* \*" has 4 fields; use 5 /);
      const duplicate = await ask('remind', { action: 'add', name: 'digest', type: 'cron', cron: '0 9 * * *', prompt: 'x' });
      expect(duplicate).toMatch(/^error: .*name "digest" is used twice; names must be unique/);
      const badUpdate = await ask('remind', { action: 'update', name: 'digest', cron: '* * * * * *' });
      expect(badUpdate).toMatch(/^error: .*cron "\* \* \* \* \* \*" has 6 fields; use 5 /);

      expect(await fs.readFile(schedulesFile, 'utf8')).toBe(fileBefore);
      expect(await cronSchedules()).toEqual(schedulesBefore);
      expect((await schedulingApi().list()).schedules.map((s) => [s.name, s.cron])).toEqual(INITIAL_ENTRIES.map((e) => [e.name, e.cron]));
    });
  });

  describe('remind: run_now', () => {
    it('runs a cron entry in <persona>:cron:<name>; reply_to_origin reaches the primary when the entry names no deliver', async () => {
      background = () => ({
        toolCalls: [
          { name: 'reply_to_origin', arguments: { text: 'Digest: three new things.' } },
          { name: 'end_task', arguments: { status: 'ok' } },
        ],
      });
      const known = await finishedTurns('testy:cron:%');
      expect(await ask('remind', { action: 'run_now', name: 'digest' })).toBe('schedule "digest" is running now, in its own turn');
      const turn = await nextFinishedTurn('testy:cron:%', known);
      expect(turn).toMatchObject({ conversationId: 'testy:cron:digest', kind: 'cron', status: 'ok' });
      await until(() => sent().find((m) => m.text === 'Digest: three new things.'), 'the digest');
      expect(sent().find((m) => m.text === 'Digest: three new things.')!.chat).toBe('u1');
      const [req] = h.fake.requests.filter(isBackground);
      expect(req.system).toContain('the scheduled job "digest"');
      expect(req.system).not.toContain(HEARTBEAT_MD);
      expect(req.lastUserText).toBe('[cron "digest"] Write the digest');
      // Nothing but the tool's answer and the digest reached the chat.
      expect(texts().sort()).toEqual(['Digest: three new things.', 'tool said: schedule "digest" is running now, in its own turn'].sort());
    });

    it('a fresh entry runs in a new throwaway conversation each time, and reply_to_origin goes to its deliver target', async () => {
      background = (req) => ({
        toolCalls: [
          // The throwaway conversation holds only this run's prompt.
          { name: 'reply_to_origin', arguments: { text: `News (${messagesOf(req).filter((m) => m.role === 'user').length} prompt)` } },
          { name: 'end_task', arguments: { status: 'ok' } },
        ],
      });
      const known = await finishedTurns('testy:cron:news%');
      await schedulingApi().runNow('news');
      const first = await nextFinishedTurn('testy:cron:news%', known);
      await schedulingApi().runNow('news');
      const second = await nextFinishedTurn('testy:cron:news%', [...known, first]);
      for (const turn of [first, second]) {
        expect(turn).toMatchObject({ kind: 'cron', status: 'ok' });
        expect(turn.conversationId).toMatch(/^testy:cron:news:.+/);
      }
      expect(first.conversationId).not.toBe(second.conversationId);
      await until(() => sent().length >= 2, () => `two news messages; sent: ${JSON.stringify(texts())}`);
      expect(sent().map((m) => ({ chat: m.chat, text: m.text }))).toEqual([
        { chat: 'u2', text: 'News (1 prompt)' },
        { chat: 'u2', text: 'News (1 prompt)' },
      ]);
      for (const req of h.fake.requests.filter(isBackground)) expect(req.system).toContain('the scheduled job "news"');
    });

    it('run_now of an unknown entry is refused and runs nothing', async () => {
      expect(await ask('remind', { action: 'run_now', name: 'nope' })).toMatch(/^error: there is no schedule named "nope"; existing: hb, digest, news/);
      await sleep(200);
      expect(h.fake.requests.filter(isBackground)).toEqual([]);
    });
  });

  describe('remind: pause and resume', () => {
    const digestTurn = (): FakeReply => ({
      toolCalls: [
        { name: 'reply_to_origin', arguments: { text: 'digest run' } },
        { name: 'end_task', arguments: { status: 'ok' } },
      ],
    });

    it('a paused entry does not run when its schedule fires; after resume it does', async () => {
      background = digestTurn;
      expect(await ask('remind', { action: 'pause', name: 'digest' })).toBe('schedule "digest" paused');
      const known = await finishedTurns('testy:cron:digest');
      const jobId = await fireCronJob('digest');
      // The firing enqueues its turn before the cron job completes; a paused one enqueues none.
      expect(await h.app.jobs.boss.findJobs(QUEUES.turn, { id: stableUuid(`cron-turn:${jobId}`) })).toEqual([]);
      await sleep(500);
      expect(await finishedTurns('testy:cron:digest')).toEqual(known);
      expect(h.fake.requests.filter(isBackground)).toEqual([]);
      expect(texts()).toEqual(['tool said: schedule "digest" paused']);

      expect(await ask('remind', { action: 'resume', name: 'digest' })).toBe('schedule "digest" resumed');
      await fireCronJob('digest');
      const turn = await nextFinishedTurn('testy:cron:digest', known);
      expect(turn).toMatchObject({ kind: 'cron', status: 'ok' });
      await until(() => texts().includes('digest run'), 'the resumed digest');
    });

    it('pause without a name holds every heartbeat and cron entry; resume without a name releases them', async () => {
      background = digestTurn;
      expect(await ask('remind', { action: 'pause' })).toBe('all your heartbeat and cron schedules are paused');
      const knownCron = await finishedTurns('testy:cron:%');
      const knownHeartbeat = await finishedTurns('testy:heartbeat');
      await fireCronJob('digest');
      await fireCronJob('hb');
      await sleep(500);
      expect(await finishedTurns('testy:cron:%')).toEqual(knownCron);
      expect(await finishedTurns('testy:heartbeat')).toEqual(knownHeartbeat);
      expect(h.fake.requests.filter(isBackground)).toEqual([]);
      const listed = await ask('remind', { action: 'list' });
      for (const name of ['hb', 'digest', 'news']) expect(listed).toMatch(new RegExp(`- ${name} \\([^)]*, paused\\)`));

      expect(await ask('remind', { action: 'resume' })).toBe('your heartbeat and cron schedules are resumed');
      await fireCronJob('digest');
      expect(await nextFinishedTurn('testy:cron:%', knownCron)).toMatchObject({ conversationId: 'testy:cron:digest', status: 'ok' });
    });

    it('resume of one entry after a pause of all lets that entry run again', async () => {
      background = digestTurn;
      expect(await ask('remind', { action: 'pause' })).toBe('all your heartbeat and cron schedules are paused');
      try {
        expect(await ask('remind', { action: 'resume', name: 'digest' })).toBe('schedule "digest" resumed');
        const listed = await ask('remind', { action: 'list' });
        expect(listed).toMatch(/- hb \([^)]*, paused\)/);
        const known = await finishedTurns('testy:cron:digest');
        await fireCronJob('digest');
        expect(await nextFinishedTurn('testy:cron:digest', known, 3000)).toMatchObject({ kind: 'cron', status: 'ok' });
        expect(listed).not.toMatch(/- digest \([^)]*, paused\)/);
      } finally {
        await schedulingApi().resume();
      }
    });
  });

  describe('remind: list', () => {
    it('shows every entry with its next run time in PARLOR_TIMEZONE, and the pending reminders', async () => {
      expect(await ask('remind', { action: 'remind', name: 'call-sam', prompt: 'Call Sam', in_seconds: 3600 })).toMatch(/^reminder "call-sam" set/);
      const listed = await ask('remind', { action: 'list' });
      const lines = listed.split('\n');
      expect(lines[0]).toBe(`Schedules (${TZ}):`);
      // 0 3 * * * in Europe/Berlin is shown at 03:00 local time, on a date to come.
      const hb = lines.find((l) => l.startsWith('- hb '));
      expect(hb).toMatch(/^- hb \(heartbeat, "0 3 \* \* \*", next at (\d{4}-\d\d-\d\d) 03:00:00 GMT\+[12]\) — "Look around"$/);
      expect(lines.find((l) => l.startsWith('- digest '))).toMatch(/^- digest \(cron, "0 7 \* \* 1", next at \d{4}-\d\d-\d\d 07:00:00 GMT\+[12]\) — "Write the digest"$/);
      expect(lines.find((l) => l.startsWith('- news '))).toMatch(/^- news \(cron, "30 6 \* \* \*", fresh, next at \d{4}-\d\d-\d\d 06:30:00 GMT\+[12]\) — "Morning news"$/);
      const reminders = lines.slice(lines.indexOf('Pending reminders:') + 1);
      expect(reminders).toHaveLength(1);
      expect(reminders[0]).toMatch(/^- call-sam: next at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+[12] — "Call Sam"$/);

      const view = await schedulingApi().list();
      for (const s of view.schedules) {
        expect(s.paused).toBe(false);
        expect(Date.parse(s.nextRun!)).toBeGreaterThan(Date.now());
      }
      const digest = view.schedules.find((s) => s.name === 'digest')!;
      expect(new Date(digest.nextRun!).getUTCDay()).toBe(1);
      expect(view.reminders.map((r) => r.name)).toEqual(['call-sam']);
      expect(await schedulingApi().cancelReminder('call-sam')).toBe(true);
    });
  });

  describe('hand edits', () => {
    it('an entry added to schedules.jsonc by hand becomes a pg-boss schedule within seconds, and one removed by hand goes', async () => {
      const original = await fs.readFile(schedulesFile, 'utf8');
      const withHandEdit = original.replace(
        /\n\]\s*$/,
        ',\n  // added by hand in an editor\n  { "name": "by-hand", "type": "cron", "cron": "15 9 * * *", "prompt": "Hand-made" }\n]\n',
      );
      // As an editor saves: to a temporary file, then renamed over the old one.
      await fs.writeFile(`${schedulesFile}.swp`, withHandEdit);
      await fs.rename(`${schedulesFile}.swp`, schedulesFile);
      await until(async () => (await cronSchedules()).some((c) => c.key === 'testy/by-hand'), 'the hand-added entry on pg-boss', 5_000);
      await fs.writeFile(schedulesFile, original);
      await until(async () => !(await cronSchedules()).some((c) => c.key === 'testy/by-hand'), 'the hand-removed entry off pg-boss', 5_000);
    });
  });

  describe('edits that could go wrong', () => {
    it('update with deliver null removes the target, so the entry goes back to the primary', async () => {
      await schedulingApi().addSchedule({ name: 'tmp-deliver', type: 'cron', cron: '0 9 * * *', prompt: 'p', deliver: { connector: 'chat', to: 'u2' } });
      expect(await ask('remind', { action: 'update', name: 'tmp-deliver', deliver: null })).toMatch(/^updated: tmp-deliver /);
      const entry = (parseJsonc(await fs.readFile(schedulesFile, 'utf8')) as { name: string; deliver?: unknown }[]).find((e) => e.name === 'tmp-deliver');
      expect(entry).toBeDefined();
      expect(entry!.deliver).toBeUndefined();
      await schedulingApi().removeSchedule('tmp-deliver');
    });

    it('two removes at once (parallel tool calls) remove exactly the two named entries', async () => {
      for (const name of ['tmp-a', 'tmp-b', 'tmp-c']) await schedulingApi().addSchedule({ name, type: 'cron', cron: '0 9 * * *', prompt: name });
      await Promise.all([schedulingApi().removeSchedule('tmp-a'), schedulingApi().removeSchedule('tmp-b')]);
      const names = (parseJsonc(await fs.readFile(schedulesFile, 'utf8')) as { name: string }[]).map((e) => e.name);
      expect(names).toContain('tmp-c');
      expect(names).not.toContain('tmp-a');
      expect(names).not.toContain('tmp-b');
      expect((await cronSchedules()).map((c) => c.key)).toEqual(expect.arrayContaining(['testy/tmp-c']));
      expect((await cronSchedules()).map((c) => c.key)).not.toContain('testy/tmp-a');
      await schedulingApi().removeSchedule('tmp-c');
    });

    it("a schedule may deliver only to the persona's own chats", async () => {
      const before = await fs.readFile(schedulesFile, 'utf8');
      const said = await ask('remind', { action: 'add', name: 'leak', type: 'cron', cron: '0 8 * * *', prompt: 'p', deliver: { connector: 'chat', to: 'someone-else' } });
      expect(said).toBe('error: deliver: chat:someone-else is not one of your chats (users, channels or primary in connectors.jsonc)');
      expect(await fs.readFile(schedulesFile, 'utf8')).toBe(before);
    });

    it("in a group, someone who is not one of the persona's users cannot change its schedules", async () => {
      const before = await fs.readFile(schedulesFile, 'utf8');
      await h.chat.inject({
        text: `call remind ${JSON.stringify({ action: 'pause' })}`,
        chat: { id: 'g2', type: 'group' },
        sender: { id: 'z9', name: 'Zed' },
      });
      const reply = await until(() => sent().find((m) => m.chat === 'g2' && m.text.startsWith('tool said: ')), 'the answer in the group');
      expect(reply.text).toBe("tool said: error: only the persona's own users can pause its schedules; ask them");
      expect(await fs.readFile(schedulesFile, 'utf8')).toBe(before);
      expect((await h.query<{ n: number }>(sql`select count(*)::int as n from schedule_pauses`))[0].n).toBe(0);
    });
  });
});

describe('a real pg-boss schedule', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({
      personas: {
        testy: { ...TEST_PERSONA, heartbeat: 'Say pulse.', schedules: [{ name: 'pulse', type: 'heartbeat', cron: '* * * * *', prompt: 'Pulse check' }] },
      },
      app: { tools: createBuiltinTools({ timezone: 'UTC' }) },
    });
    h.fake.setDefault((req) =>
      req.lastUserText === '[heartbeat "pulse"] Pulse check'
        ? {
            toolCalls: [
              { name: 'send_message', arguments: { text: 'pulse' } },
              { name: 'end_task', arguments: { status: 'ok' } },
            ],
          }
        : { toolCalls: [{ name: 'end_task', arguments: { status: 'failed', summary: `unexpected: ${req.lastUserText}` } }] },
    );
  });
  afterAll(() => h?.stop());

  it('an entry with cron "* * * * *" runs a heartbeat turn within a minute or so of start-up', { timeout: 90_000 }, async () => {
    expect((await h.app.jobs.boss.getSchedules(QUEUES.cron)).map((s) => s.key)).toEqual(['testy/pulse']);
    const turn = await until(
      async () =>
        (await h.query<TurnRow>(sql`select id, conversation_id as "conversationId", kind, status from turns where ended_at is not null`))[0],
      'a heartbeat turn from the pg-boss schedule',
      70_000,
    );
    expect(turn).toMatchObject({ conversationId: 'testy:heartbeat', kind: 'heartbeat', status: 'ok' });
    await until(() => h.chat.sent.length >= 1, 'the pulse message');
    expect(h.chat.sent.map((m: OutboundMessage) => ({ chat: m.chat, text: m.text }))).toEqual([{ chat: 'u1', text: 'pulse' }]);
    expect(h.fake.requests[0].system).toContain('Say pulse.');
  });
});
