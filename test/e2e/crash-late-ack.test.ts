// A real `parlor start` on Slack's Socket Mode that cannot store an event by Slack's 3 s deadline (its insert waits on
// a lock, as when Postgres restarts), acknowledges it anyway, and is killed with SIGKILL before it could store it.
// Slack never sends an acknowledged event again: the event was kept on disk before the acknowledgement, and the
// next start stores and answers it, once.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ResultPromise } from 'execa';
import postgres from 'postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { startFakeSlack, type FakeSlack } from '../support/fake-slack.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { killAll, startParlorProcess } from '../support/parlor-process.ts';
import { until } from '../support/until.ts';

const OWNER = 'U0LATE1';

let db: TestDatabase;
let fake: FakeLlm;
let telegram: FakeTelegram;
let slack: FakeSlack;
let sql: postgres.Sql;
let personasDir: string;
let home: string;
const children: ResultPromise[] = [];

function startParlor(): ResultPromise {
  return startParlorProcess(
    {
      databaseUrl: db.url,
      personasDir,
      llmBaseUrl: fake.openaiBaseUrl,
      telegramApiRoot: telegram.apiRoot,
      home,
      env: { SLACK_BOT_TOKEN: slack.botToken, SLACK_APP_TOKEN: slack.appToken, SLACK_API_URL: slack.apiUrl },
    },
    children,
  );
}

const echoes = (text: string) =>
  slack.callsOf('chat.postMessage').filter((c) => typeof c.response === 'object' && c.response.ok && c.body.text === `echo: ${text}`).length;
const heldFiles = async () => (await fs.readdir(path.join(home, 'held-events')).catch(() => [] as string[])).filter((n) => n.endsWith('.json'));

beforeAll(async () => {
  [db, fake, telegram, slack] = await Promise.all([createTestDatabase(), startFakeLlm(), startFakeTelegram(), startFakeSlack({ echoBotMessages: false })]);
  sql = postgres(db.url, { max: 2, onnotice: () => {} });
  fake.setDefault((req) => ({ text: `echo: ${req.lastUserText}` }));
  home = await fs.mkdtemp(path.join(os.tmpdir(), 'late-ack-home-'));
  personasDir = await writePersonas({ assistant: { connectors: { users: [`slack:${OWNER}`], primary: { connector: 'slack', to: OWNER } } } });
}, 60_000);

afterAll(async () => {
  await killAll(children);
  await sql?.end({ timeout: 1 });
  await Promise.all([slack?.close(), telegram?.close(), fake?.close()]);
  await db?.drop();
  if (personasDir) await fs.rm(personasDir, { recursive: true, force: true });
  if (home) await fs.rm(home, { recursive: true, force: true });
});

it('an event acknowledged at the deadline and not yet stored when the process is killed is answered after the restart, once', async () => {
  const first = startParlor();
  await slack.waitForConnection(1, 45_000);
  const warmup = await slack.dm({ user: OWNER, text: 'warm up' });
  expect(warmup.acked).toBe(true);
  await until(() => echoes('warm up') === 1, 'the first answer', 20_000);

  // Storing waits on this lock as long as the transaction holds it.
  const blocker = await sql.reserve();
  await blocker`begin`;
  await blocker`lock table inbound_events in share mode`;
  const delivery = await slack.dm({ user: OWNER, text: 'kept through a kill' });
  expect(delivery.acked).toBe(true);
  expect(delivery.latencyMs).toBeGreaterThan(2000);
  expect(delivery.latencyMs).toBeLessThan(3000);
  expect(await heldFiles()).toHaveLength(1);

  first.kill('SIGKILL');
  await first;
  // Its transaction, sent whole, would still commit once the lock is free (Postgres notices a dead client only when
  // it answers): it dies with its process, as when Postgres restarts under it.
  await sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
  await blocker`rollback`;
  blocker.release();
  // Only the warm-up was stored: the kill came first.
  expect(await sql`select 1 from inbound_events where connector = 'slack'`).toHaveLength(1);

  startParlor();
  await until(() => echoes('kept through a kill') === 1, 'the kept event answered after the restart', 45_000);
  await until(async () => (await heldFiles()).length === 0, 'the kept event dropped once stored', 5000);
  // A while later still once, and no event was stored twice.
  await new Promise((r) => setTimeout(r, 1500));
  expect(echoes('kept through a kill')).toBe(1);
  expect(await sql`select 1 from inbound_events where connector = 'slack'`).toHaveLength(2);
}, 150_000);
