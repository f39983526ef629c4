// Real `parlor start` processes killed with SIGKILL while a background task is in the middle of its work: after a
// restart the task runs again, and its parent gets exactly one wake with every result of the batch.
import fs from 'node:fs/promises';
import type { ResultPromise } from 'execa';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm, type FakeReply, type RecordedRequest } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { killAll, startParlorProcess } from '../support/parlor-process.ts';
import { until } from '../support/until.ts';

const USER = 1001;

let db: TestDatabase;
let fake: FakeLlm;
let telegram: FakeTelegram;
let personasDir: string;
let sql: postgres.Sql;
const children: ResultPromise[] = [];
/** How many times the slow task's model call has been asked for. */
let betaCalls = 0;

const isTask = (req: RecordedRequest) => req.system.startsWith('You are a background task');
const lastMessage = (req: RecordedRequest) => (req.body.messages as { role: string; content: string }[]).at(-1)!;

function model(req: RecordedRequest): FakeReply {
  if (isTask(req)) {
    if (req.lastUserText.includes('beta')) {
      betaCalls++;
      // The first time, it works long enough to be killed in the middle.
      return betaCalls === 1 ? { text: 'beta, the first time', delayMs: 60_000 } : { text: 'found beta' };
    }
    return { text: 'found alpha' };
  }
  if (req.lastUserText.startsWith('[subagent result')) return { text: `summary of:\n${req.lastUserText}` };
  return lastMessage(req).role === 'tool'
    ? { text: 'Working on it.' }
    : {
        toolCalls: [
          { name: 'spawn_subagent', arguments: { task: 'research alpha', label: 'alpha' } },
          { name: 'spawn_subagent', arguments: { task: 'research beta', label: 'beta' } },
        ],
      };
}

function startParlor(role: 'all' | 'worker'): ResultPromise {
  return startParlorProcess({ databaseUrl: db.url, personasDir, llmBaseUrl: fake.openaiBaseUrl, telegramApiRoot: telegram.apiRoot, role }, children);
}

const sentTexts = () => telegram.callsOf('sendMessage').map((c) => String(c.body.text));

beforeAll(async () => {
  db = await createTestDatabase();
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
  fake = await startFakeLlm();
  fake.setDefault(model);
  telegram = await startFakeTelegram();
  personasDir = await writePersonas({
    assistant: { connectors: { users: [`telegram:${USER}`], primary: { connector: 'telegram', to: String(USER) } } },
  });
});

afterAll(async () => {
  await killAll(children);
  await sql?.end();
  await telegram?.close();
  await fake?.close();
  await db?.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
});

describe('processes killed while a background task works', () => {
  it('the task runs again after the restart, and the parent gets one wake with both results', async () => {
    const processes = [startParlor('all'), startParlor('worker')];
    telegram.pushUpdates({
      update_id: 1,
      message: { message_id: 501, date: Math.floor(Date.now() / 1000), chat: { id: USER, type: 'private' }, from: { id: USER, is_bot: false, first_name: 'Ana' }, text: 'compare alpha and beta' },
    });
    await until(() => sentTexts().includes('Working on it.'), 'the parent to answer at once', 60_000);
    // Alpha is done; beta is in the middle of its model call: both processes die.
    await until(async () => betaCalls === 1 && (await sql`select 1 from subagent_tasks where label = 'alpha' and status = 'ok'`).length === 1, 'alpha to end and beta to be working', 60_000);
    for (const child of processes) child.kill('SIGKILL');
    await Promise.all(processes);
    expect(sentTexts().filter((t) => t.startsWith('summary of:'))).toHaveLength(0);

    startParlor('all');
    await until(() => sentTexts().some((t) => t.startsWith('summary of:')), 'the wake after the restart', 150_000);
    await until(async () => (await sql`select 1 from turns where status = 'running'`).length === 0, 'every turn to end', 60_000);
    await new Promise((r) => setTimeout(r, 3000));
    const summaries = sentTexts().filter((t) => t.startsWith('summary of:'));
    expect(summaries).toHaveLength(1);
    expect(summaries[0]).toMatch(/"alpha": ok\n {2}found alpha/);
    expect(summaries[0]).toMatch(/"beta": ok\n {2}found beta/);
    expect(betaCalls).toBe(2);
    const tasks = await sql<{ label: string; status: string; pushed: boolean }[]>`select label, status, pushed_at is not null as pushed from subagent_tasks order by label`;
    expect(tasks).toEqual([
      { label: 'alpha', status: 'ok', pushed: true },
      { label: 'beta', status: 'ok', pushed: true },
    ]);
  }, 300_000);
});
