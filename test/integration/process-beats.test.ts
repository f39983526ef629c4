// A process that stops with its connections open (SIGSTOP, a frozen VM, a machine cut off): its heartbeat in
// process_beats stops, a steady process fences it (its connections terminated, its session marked), a fenced session
// counts as gone even when it connects again, may take nothing for sending, and finds out at its next beat. A process
// that merely reconnected, or was itself away, fences nobody. The whole story with real processes is in
// test/e2e/hung-process.test.ts.
import { sql as dsql } from 'drizzle-orm';
import pino from 'pino';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase, type Database } from '../../src/db/client.ts';
import { claimPendingOutbound, insertOutbound, takeOverOutbound } from '../../src/db/outbound-messages.ts';
import { beat, fenceHungSessions, LIVE_SESSIONS, pruneBeats } from '../../src/db/sessions.ts';
import { startJobSystem } from '../../src/jobs/boss.ts';
import { startProcessBeat } from '../../src/jobs/process-beat.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { until } from '../support/until.ts';

let db: TestDatabase;
const clients: postgres.Sql[] = [];
const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A process's connection, under its session name. */
function session(name: string): postgres.Sql {
  const client = postgres(db.url, { max: 1, onnotice: () => {}, connection: { application_name: name } });
  clients.push(client);
  return client;
}

const live = async () =>
  ((await db.database.db.execute(dsql`select application_name as name from ${LIVE_SESSIONS} s(application_name)`)) as unknown as { name: string }[]).map((r) => r.name);

const ageBeat = (name: string, seconds: number) =>
  db.database.sql`update process_beats set beat_at = now() - make_interval(secs => ${seconds}) where session = ${name}`;

/** The event loop held for `ms`: as a process sees it when it runs again after being stopped. */
function hold(ms: number) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    /* held */
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.end({ timeout: 1 })));
  await db.database.sql`delete from process_beats`;
});

afterAll(async () => {
  await db?.drop();
});

describe('fencing a session that stopped beating', () => {
  it('fences a connected session whose beat and connections are older than the hung period, and only it', async () => {
    const hung = session('parlor:1:hung');
    const fresh = session('parlor:2:fresh');
    const reconnected = session('parlor:3:reconnected');
    await beat(hung, 'parlor:1:hung', true);
    await beat(fresh, 'parlor:2:fresh', true);
    // Its beat is old too, but it connected within the period (back from a database restart, say), and will beat.
    await sleep(1200);
    await beat(reconnected, 'parlor:3:reconnected', true);
    await ageBeat('parlor:1:hung', 60);
    await ageBeat('parlor:3:reconnected', 60);
    await reconnected.end();
    const again = session('parlor:3:reconnected');
    await again`select 1`;
    // Not connected at all: gone already, which the sweeps of gone sessions handle; nothing to fence.
    await db.database.sql`insert into process_beats (session, beat_at) values ('parlor:4:gone', now() - interval '1 hour')`;

    await beat(fresh, 'parlor:2:fresh', false);
    const [{ pid }] = await hung<{ pid: number }[]>`select pg_backend_pid() as pid`;

    const fenced = await fenceHungSessions(db.database.sql, db.database.applicationName, 1);
    expect(fenced).toEqual([{ session: 'parlor:1:hung', terminated: 1 }]);

    // Its connection is gone, and so is it from the live sessions, even once it connects again.
    const backends = async () => (await db.database.sql`select 1 from pg_stat_activity where pid = ${pid}`).length;
    for (let i = 0; i < 50 && (await backends()) > 0; i++) await sleep(20);
    expect(await backends()).toBe(0);
    await hung`select 1`.catch(() => {});
    await hung`select 1`;
    const names = await live();
    expect(names).toContain('parlor:2:fresh');
    expect(names).toContain('parlor:3:reconnected');
    expect(names).not.toContain('parlor:1:hung');
    // Its next beat says it was fenced; the others' say they are fine.
    expect(await beat(hung, 'parlor:1:hung', false)).toBe(false);
    expect(await beat(fresh, 'parlor:2:fresh', false)).toBe(true);
    // Fenced once: a second pass finds nothing more to do.
    expect(await fenceHungSessions(db.database.sql, db.database.applicationName, 1)).toEqual([]);
  });

  it('never fences its own session', async () => {
    const own = db.database.applicationName;
    await beat(db.database.sql, own, true);
    await ageBeat(own, 60);
    await sleep(1100);
    expect(await fenceHungSessions(db.database.sql, own, 1)).toEqual([]);
  });

  it('lets a fenced session take nothing for sending: what it writes waits in the outbox for a live process', async () => {
    const zombie = 'parlor:9:zombie';
    await db.database.sql`insert into process_beats (session, fenced_at) values (${zombie}, now())`;
    const row = await insertOutbound(db.database.db, {
      dedupeKey: 'from-the-fenced',
      connector: 'chat',
      chat: 'c1',
      text: 'late answer',
      status: 'sending',
      claimedBy: zombie,
    });
    expect(row).toMatchObject({ status: 'pending', claimedBy: null });
    expect(await claimPendingOutbound(db.database.db, [{ connector: 'chat' }], zombie)).toEqual([]);
    expect(await takeOverOutbound(db.database.db, row!.id, zombie)).toBeUndefined();
    // A live process takes it.
    const taken = await claimPendingOutbound(db.database.db, [{ connector: 'chat' }], 'parlor:8:live');
    expect(taken.map((r) => r.dedupeKey)).toEqual(['from-the-fenced']);
  });

  it('forgets the beats of sessions gone for a day, and keeps the rest', async () => {
    const connected = session('parlor:6:connected');
    await beat(connected, 'parlor:6:connected', true);
    await ageBeat('parlor:6:connected', 3 * 24 * 3600);
    await db.database.sql`insert into process_beats (session, beat_at) values
      ('parlor:5:long-gone', now() - interval '2 days'), ('parlor:7:lately-gone', now() - interval '1 hour')`;
    await pruneBeats(db.database.sql);
    const left = (await db.database.sql<{ session: string }[]>`select session from process_beats order by session`).map((r) => r.session);
    // Connected: kept, however old its beat; gone for less than a day: kept, should it come back.
    expect(left).toEqual(['parlor:6:connected', 'parlor:7:lately-gone']);
  });
});

describe("a process's heartbeat", () => {
  it('beats, is steady only after a whole hung period of beats, and stops when it finds itself fenced', async () => {
    let fencedCalls = 0;
    const beats = await startProcessBeat({ database: db.database, log, hungAfterMs: 600, onFenced: () => fencedCalls++ });
    const name = db.database.applicationName;
    const beatAt = async () =>
      (await db.database.sql<{ at: number }[]>`select extract(epoch from beat_at)::float8 as at from process_beats where session = ${name}`)[0]?.at;
    const first = await beatAt();
    expect(first).toBeTypeOf('number');
    expect(beats.steady()).toBe(false);
    await sleep(800);
    expect(beats.steady()).toBe(true);
    expect(await beatAt()).toBeGreaterThan(first!);

    await db.database.sql`update process_beats set fenced_at = now() where session = ${name}`;
    await sleep(300);
    expect(fencedCalls).toBe(1);
    expect(beats.steady()).toBe(false);
    await sleep(300);
    // Once: it stopped beating.
    expect(fencedCalls).toBe(1);
    await beats.stop();
    // A fenced row stays, so the session stays fenced.
    expect(await beatAt()).toBeTypeOf('number');
  });

  it('takes its row away when it stops cleanly', async () => {
    const beats = await startProcessBeat({ database: db.database, log, hungAfterMs: 600, onFenced: () => {} });
    await beats.stop();
    expect(await db.database.sql`select 1 from process_beats where session = ${db.database.applicationName}`).toHaveLength(0);
  });

  it('is not steady after a gap in its own beats (it was stopped itself, or the database was away)', async () => {
    const beats = await startProcessBeat({ database: db.database, log, hungAfterMs: 600, onFenced: () => {} });
    await sleep(800);
    expect(beats.steady()).toBe(true);
    // The event loop held for longer than two beats: as a stopped process sees it when it runs again.
    hold(350);
    expect(beats.steady()).toBe(false);
    await sleep(250);
    expect(beats.steady()).toBe(false);
    await sleep(700);
    expect(beats.steady()).toBe(true);
    await beats.stop();
  });

  describe('the gate before a new database connection', () => {
    let other: Database;
    beforeAll(async () => {
      other = await connectDatabase(db.url);
    });
    afterAll(async () => {
      await other?.close();
    });

    it('leaves no connection stuck when the gate cannot ask: each fails as a refused one would, and the pool recovers', async () => {
      await other.sql`select 1`;
      await db.database.sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${other.applicationName}`;
      // More refusals than the pool has connections: a connection left stuck by one would hang the query after.
      let refusals = 12;
      other.gate.before = async () => {
        if (refusals-- > 0) throw Object.assign(new Error('the database is away'), { code: 'ECONNREFUSED' });
      };
      try {
        let failed = 0;
        for (let i = 0; i < 30 && refusals > 0; i++) {
          await other.sql`select 1`.catch((err: { code?: string }) => {
            if (err.code === 'ECONNREFUSED') failed++;
          });
        }
        expect(failed).toBeGreaterThanOrEqual(10);
        const [row] = await other.sql<{ ok: number }[]>`select 1 as ok`;
        expect(row.ok).toBe(1);
      } finally {
        other.gate.before = undefined;
      }
    }, 20_000);

    it('opens at once while the last beat is recent, and after a beat when it is old', async () => {
      let fencedCalls = 0;
      const beats = await startProcessBeat({ database: other, log, hungAfterMs: 600, onFenced: () => fencedCalls++ });
      const beatAt = async () =>
        Number((await db.database.sql<{ at: number }[]>`select extract(epoch from beat_at)::float8 as at from process_beats where session = ${other.applicationName}`)[0].at);
      await other.gate.before!();
      hold(400);
      const before = await beatAt();
      await other.gate.before!();
      expect(await beatAt()).toBeGreaterThan(before);
      expect(fencedCalls).toBe(0);
      await beats.stop();
      expect(other.gate.before).toBeUndefined();
    });

    it('counts a beat from when it was sent: one answered only later (as to a process stopped meanwhile) opens nothing', async () => {
      let landed = 0;
      // The heartbeat's connection, telling the test when a beat's answer was read.
      const beatSql = ((...args: Parameters<postgres.Sql>) => {
        const query = (other.beatSql as unknown as (...a: unknown[]) => Promise<unknown>)(...args);
        void query.then(() => (landed = Date.now()), () => {});
        return query;
      }) as unknown as postgres.Sql;
      const beats = await startProcessBeat({ database: { ...other, beatSql }, log, hungAfterMs: 3000, onFenced: () => {} });
      const locker = await db.database.sql.reserve();
      try {
        // Its next beat (the timer's, half a second on) waits in Postgres for the row, past half the hung period.
        await locker`begin`;
        await locker`select 1 from process_beats where session = ${other.applicationName} for update`;
        landed = 0;
        await sleep(2300);
        await locker`commit`;
        while (!landed) await new Promise((resolve) => setImmediate(resolve));
        // Answered now, but sent 1.8 s ago: the gate asks for a beat of its own before it opens.
        let opened = false;
        void other.gate.before!().then(() => (opened = true));
        for (let i = 0; i < 20; i++) await Promise.resolve();
        expect(opened).toBe(false);
        await until(() => opened);
      } finally {
        locker.release();
        await beats.stop();
      }
    });

    it('stays shut for a process that finds itself fenced when it runs again, so it writes nothing', async () => {
      let fencedCalls = 0;
      const beats = await startProcessBeat({ database: other, log, hungAfterMs: 600, onFenced: () => fencedCalls++ });
      await db.database.sql`update process_beats set fenced_at = now() where session = ${other.applicationName}`;
      hold(400);
      // Asked before its timer beats: the gate beats first, and learns it.
      let opened = false;
      void other.gate.before!().then(() => (opened = true));
      await until(() => fencedCalls === 1);
      await sleep(300);
      expect(opened).toBe(false);
      expect(fencedCalls).toBe(1);
      await beats.stop();
    });

    it('keeps a fenced process from writing on the connections that replace those the fence terminated', async () => {
      let fencedCalls = 0;
      const beats = await startProcessBeat({ database: other, log, hungAfterMs: 600, onFenced: () => fencedCalls++ });
      // Its pools have connections, as a running process's do.
      await other.sql`select 1`;
      await other.bookkeeping.execute(dsql`select 1`);
      // Fenced as another process would fence it.
      await db.database.sql`update process_beats set fenced_at = now() where session = ${other.applicationName}`;
      await db.database.sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${other.applicationName}`;
      await until(() => fencedCalls === 1, 'the process to find itself fenced', 5000);
      let written = false;
      void other.sql`insert into process_beats (session) values ('written by the fenced')`.then(() => (written = true), () => {});
      void other.bookkeeping.execute(dsql`insert into process_beats (session) values ('written by the fenced, too')`).then(() => (written = true), () => {});
      await sleep(500);
      expect(written).toBe(false);
      expect(await db.database.sql`select 1 from process_beats where session like 'written by%'`).toHaveLength(0);
      await beats.stop();
    });

    it("keeps a fenced process's pg-boss from taking a job when it runs again", async () => {
      const jobs = await startJobSystem(other, log);
      let fencedCalls = 0;
      const beats = await startProcessBeat({ database: other, log, hungAfterMs: 1200, onFenced: () => fencedCalls++ });
      try {
        // pg-boss's pool has its connection, as a running process's has.
        expect(await jobs.boss.fetch(QUEUES.reminder)).toEqual([]);
        const id = await jobs.send(QUEUES.reminder, { reminderId: 'r' }, {});
        // Stopped, fenced meanwhile, and running again: its first steps are pg-boss's fetches, as a worker polling
        // does. The first fails on a terminated connection; the next would take the job on a new one, before the
        // heartbeat's timer beats again.
        await db.database.sql`update process_beats set fenced_at = now() where session = ${other.applicationName}`;
        await db.database.sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${other.applicationName}`;
        hold(700);
        let fetched: unknown;
        void (async () => {
          for (let i = 0; i < 3; i++) fetched = await jobs.boss.fetch(QUEUES.reminder).catch((err: unknown) => err);
        })();
        await until(() => fencedCalls === 1, 'the process to find itself fenced', 5000);
        await sleep(500);
        const [job] = await db.database.sql<{ state: string }[]>`select state from pgboss.job where id = ${id}::uuid`;
        expect(job.state).toBe('created');
        // Waiting at the gate for good, or failed on a terminated connection: never a job.
        if (fetched !== undefined) expect(fetched).toBeInstanceOf(Error);
      } finally {
        await beats.stop();
        await jobs.stop({ timeoutMs: 1000 }).catch(() => {});
      }
    });
  });
});
