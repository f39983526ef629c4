// A real `parlor start` killed with SIGKILL after it wrote a reply to its ledger and before Telegram accepted it:
// the next process sends that reply exactly once, whether it comes back at once or after ten minutes.
import fs from 'node:fs/promises';
import type { ResultPromise } from 'execa';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm, type FakeReply, type RecordedRequest } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { startHoldingProxy, type HoldingProxy } from '../support/holding-proxy.ts';
import { killAll, startParlorProcess } from '../support/parlor-process.ts';
import { until } from '../support/until.ts';

const USER = 1001;

let db: TestDatabase;
let fake: FakeLlm;
let telegram: FakeTelegram;
let proxy: HoldingProxy;
let personasDir: string;
let sql: postgres.Sql;
const children: ResultPromise[] = [];
let nextUpdate = 1;

/** The model: echoes, sets a reminder when asked, and answers a reminder with reply_to_origin (again if cut off). */
function model(req: RecordedRequest): FakeReply {
  const messages: any[] = req.body.messages ?? [];
  const last = messages[messages.length - 1];
  if (req.lastUserText.startsWith('[reminder')) {
    if (last.role === 'tool' && !String(last.content).startsWith('interrupted')) return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
    return { toolCalls: [{ name: 'reply_to_origin', arguments: { text: 'time to stretch' } }] };
  }
  if (req.lastUserText === 'remind me') {
    if (last.role === 'tool') return { text: 'I will remind you.' };
    return { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'stretch', prompt: 'stretch', in_seconds: 1 } }] };
  }
  return { text: `echo: ${req.lastUserText}` };
}

function startParlor(): ResultPromise {
  return startParlorProcess({ databaseUrl: db.url, personasDir, llmBaseUrl: fake.openaiBaseUrl, telegramApiRoot: proxy.apiRoot }, children);
}

function say(text: string) {
  telegram.pushUpdates({
    update_id: nextUpdate++,
    message: { message_id: 500 + nextUpdate, date: Math.floor(Date.now() / 1000), chat: { id: USER, type: 'private' }, from: { id: USER, is_bot: false, first_name: 'Ana' }, text },
  });
}

/** How often Telegram accepted a message with this text. */
const accepted = (text: string) => telegram.callsOf('sendMessage').filter((c) => String(c.body.text).includes(text)).length;


async function kill(child: ResultPromise) {
  child.kill('SIGKILL');
  await child;
}

beforeAll(async () => {
  db = await createTestDatabase();
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
  fake = await startFakeLlm();
  fake.setDefault(model);
  telegram = await startFakeTelegram();
  proxy = await startHoldingProxy(telegram.apiRoot);
  personasDir = await writePersonas({
    assistant: { connectors: { users: [`telegram:${USER}`], primary: { connector: 'telegram', to: String(USER) } } },
  });
});

afterAll(async () => {
  await killAll(children);
  await sql?.end();
  await proxy?.close();
  await telegram?.close();
  await fake?.close();
  await db?.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
});

describe('a process killed between its ledger row and the platform accepting the message', () => {
  it('a reply cut off by kill -9 is sent exactly once by the next process, and the turn is not recorded ok without it', async () => {
    const held = proxy.holdNext('sendMessage', (body) => String(body.text).includes('echo: hello'));
    const first = startParlor();
    say('hello');
    await held;
    await kill(first);
    const [row] = await sql<{ status: string }[]>`select status from outbound_messages where text = 'echo: hello'`;
    expect(row.status).toBe('sending');
    expect(accepted('echo: hello')).toBe(0);

    const restartedAt = Date.now();
    startParlor();
    await until(() => accepted('echo: hello') === 1, 'the reply to be sent again', 90_000);
    // The new process gives back the job the dead one held as soon as it has seen it gone twice: well before the
    // job's heartbeat (30 s from the kill) would have.
    expect(Date.now() - restartedAt).toBeLessThan(25_000);
    await until(async () => (await sql`select 1 from turns where status = 'running'`).length === 0, 'the turn to finish', 90_000);
    // Time for a second copy to show up, if one were coming.
    await new Promise((r) => setTimeout(r, 3000));
    expect(accepted('echo: hello')).toBe(1);
    const turns = await sql<{ status: string }[]>`select status from turns where kind = 'user'`;
    expect(turns.map((t) => t.status)).toEqual(['ok']);
  }, 150_000);

  it("a reminder's reply_to_origin cut off by kill -9 is sent exactly once, even after more than ten minutes down", async () => {
    // The process from the first test is still running: it sets the reminder, and the firing's reply is held.
    const held = proxy.holdNext('sendMessage', (body) => String(body.text).includes('time to stretch'));
    say('remind me');
    await held;
    await kill(children[children.length - 1]);
    expect(accepted('time to stretch')).toBe(0);
    // Down for eleven minutes, as the ledger sees it.
    await sql`update outbound_messages set claimed_at = claimed_at - interval '11 minutes' where status = 'sending'`;

    startParlor();
    await until(() => accepted('time to stretch') === 1, "the reminder's message to be sent again", 90_000);
    await until(async () => (await sql`select 1 from turns where status = 'running'`).length === 0, 'the wake turn to finish', 90_000);
    await new Promise((r) => setTimeout(r, 3000));
    expect(accepted('time to stretch')).toBe(1);
    expect(accepted('I will remind you.')).toBe(1);
  }, 150_000);
});
