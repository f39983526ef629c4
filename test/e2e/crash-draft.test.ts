// A real `parlor start` killed with SIGKILL while a streamed reply is half written: the next process writes the
// answer into that same message. No half-finished draft is left beside a second copy.
import fs from 'node:fs/promises';
import type { ResultPromise } from 'execa';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { killAll, startParlorProcess } from '../support/parlor-process.ts';
import { until } from '../support/until.ts';

const USER = 1001;
const ANSWER = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

let db: TestDatabase;
let fake: FakeLlm;
let telegram: FakeTelegram;
let personasDir: string;
let sql: postgres.Sql;
const children: ResultPromise[] = [];

function startParlor(): ResultPromise {
  return startParlorProcess({ databaseUrl: db.url, personasDir, llmBaseUrl: fake.openaiBaseUrl, telegramApiRoot: telegram.apiRoot }, children);
}

const sentTo = () => telegram.callsOf('sendMessage').filter((c) => String(c.body.chat_id) === String(USER));
const editsTo = () => telegram.callsOf('editMessageText').filter((c) => String(c.body.chat_id) === String(USER));

beforeAll(async () => {
  db = await createTestDatabase();
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
  fake = await startFakeLlm();
  // 40 chunks, 150 ms apart: six seconds of writing, time enough to die in the middle.
  fake.setDefault(() => ({ text: ANSWER, chunks: 40, chunkDelayMs: 150 }));
  telegram = await startFakeTelegram();
  personasDir = await writePersonas({
    assistant: { connectors: { users: [`telegram:${USER}`], primary: { connector: 'telegram', to: String(USER) } }, tools: { stream: true } },
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

describe('a process killed while it streams a reply', () => {
  it('the next process finishes the answer in the same message, and sends no second one', async () => {
    const first = startParlor();
    telegram.pushUpdates({
      update_id: 1,
      message: { message_id: 501, date: Math.floor(Date.now() / 1000), chat: { id: USER, type: 'private' }, from: { id: USER, is_bot: false, first_name: 'Ana' }, text: 'tell me slowly' },
    });
    // The draft is on screen and has grown at least once.
    await until(() => sentTo().length === 1 && editsTo().length >= 1, 'the draft to show and grow', 60_000);
    const draftId = (sentTo()[0].result as { message_id: number }).message_id;
    first.kill('SIGKILL');
    await first;
    expect(String(sentTo()[0].body.text)).not.toBe(ANSWER);

    startParlor();
    await until(() => editsTo().some((c) => c.body.text === ANSWER), 'the answer written into the draft', 120_000);
    await until(async () => (await sql`select 1 from turns where status = 'running'`).length === 0, 'the turn to finish', 60_000);
    await new Promise((r) => setTimeout(r, 2000));
    expect(sentTo()).toHaveLength(1);
    const final = editsTo().filter((c) => c.body.text === ANSWER);
    expect(final.map((c) => c.body.message_id)).toEqual([draftId]);
    const turns = await sql<{ status: string }[]>`select status from turns where kind = 'user' order by started_at`;
    expect(turns.at(-1)?.status).toBe('ok');
  }, 200_000);
});
