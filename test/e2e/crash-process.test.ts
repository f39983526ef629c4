// A real `parlor start` killed with SIGKILL while a command it started runs in the background: in the sandbox the
// command dies with it; outside (no bubblewrap on PATH), nothing ends the command with Parlor, so the next start
// kills what was left. Either way the chat is told once that the command was lost.
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ResultPromise } from 'execa';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm, type FakeReply, type RecordedRequest } from '../support/fake-llm.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { writePersonas } from '../support/harness.ts';
import { killAll, startParlorProcess } from '../support/parlor-process.ts';
import { until } from '../support/until.ts';
import { killAll as killMarked, processesWith } from '../tools/shell-helpers.ts';

const USER = 1001;
const MARKER = '324.5';
/** What the model runs; outside the sandbox, with a child that sheds everything Parlor could find it by but its parent. */
let commandLine = `sleep ${MARKER}`;

let db: TestDatabase;
let fake: FakeLlm;
let sql: postgres.Sql;
let telegram: FakeTelegram;
let personasDir: string;
/** A PATH with node, sleep, env and setsid, and no bubblewrap. */
let bareBin: string;
const children: ResultPromise[] = [];

function model(req: RecordedRequest): FakeReply {
  if (req.lastUserText.startsWith('[background command]')) return { text: `Lost: ${req.lastUserText}` };
  const last = (req.body.messages as { role: string; content: string }[]).at(-1)!;
  return last.role === 'tool' ? { text: `Started. ${last.content}` } : { toolCalls: [{ name: 'shell_exec', arguments: { command: commandLine, background: true } }] };
}

const startParlor = (options: { bare?: boolean } = {}) =>
  startParlorProcess({ databaseUrl: db.url, personasDir, llmBaseUrl: fake.openaiBaseUrl, telegramApiRoot: telegram.apiRoot, ...(options.bare ? { path: bareBin } : {}) }, children);
const sentTexts = () => telegram.callsOf('sendMessage').map((c) => String(c.body.text));

beforeAll(async () => {
  db = await createTestDatabase();
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
  fake = await startFakeLlm();
  fake.setDefault(model);
  telegram = await startFakeTelegram();
  bareBin = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-bin-'));
  // Commands may run as a user of their own: they need to reach it too.
  await fs.chmod(bareBin, 0o755);
  for (const name of ['node', 'sleep', 'env', 'setsid']) await fs.symlink(execPath(name), path.join(bareBin, name));
  personasDir = await writePersonas({
    assistant: {
      connectors: { users: [`telegram:${USER}`], primary: { connector: 'telegram', to: String(USER) } },
      tools: { allow: ['shell_exec'], shell: 'unsandboxed' },
    },
  });
});

afterAll(async () => {
  await killAll(children);
  killMarked([MARKER]);
  await sql?.end();
  await telegram?.close();
  await fake?.close();
  await db?.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
  await fs.rm(bareBin, { recursive: true, force: true });
});

function execPath(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    try {
      fsSync.accessSync(candidate, fsSync.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(`${name} is not on PATH`);
}

let update = 0;

/** Starts the command through a turn, kills Parlor, starts it again: what was left, and what the chat was told. */
async function crashWhileRunning(bare: boolean): Promise<{ survivedTheKill: boolean; lost: string[] }> {
  const before = sentTexts().length;
  const first = startParlor({ bare });
  telegram.pushUpdates({
    update_id: ++update,
    message: { message_id: 600 + update, date: Math.floor(Date.now() / 1000), chat: { id: USER, type: 'private' }, from: { id: USER, is_bot: false, first_name: 'Ana' }, text: 'start the long job' },
  });
  const started = await until(() => sentTexts().slice(before).find((t) => t.startsWith('Started.')), 'the answer', 60_000);
  expect(started).toMatch(/^Started\. running in the background as bg_/);
  await until(() => processesWith(MARKER).length > 0, 'the command to run', 10_000);
  // The turn is over (a turn cut off by the kill would hold the chat until pg-boss takes it back: another test's story).
  await until(async () => (await sql`select 1 from pgboss.job where name = 'turn' and state = 'active'`).length === 0, 'the turn to end', 10_000);
  first.kill('SIGKILL');
  await first;
  await new Promise((resolve) => setTimeout(resolve, 300));
  const survivedTheKill = processesWith(MARKER).length > 0;
  const second = startParlor({ bare });
  await until(() => processesWith(MARKER).length === 0, 'no command left running', 60_000);
  await until(() => sentTexts().slice(before).some((t) => t.startsWith('Lost:')), 'the lost notice', 60_000);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  second.kill('SIGTERM');
  await second;
  return { survivedTheKill, lost: sentTexts().slice(before).filter((t) => t.startsWith('Lost:')) };
}

describe('a Parlor process killed while a command runs in the background', () => {
  it.runIf(fsSync.existsSync('/usr/bin/bwrap') || fsSync.existsSync('/bin/bwrap'))('in the sandbox, the command ends with Parlor, and the next start tells the chat once', async () => {
    const { survivedTheKill, lost } = await crashWhileRunning(false);
    expect(survivedTheKill).toBe(false);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatch(/\[background command\] bg_[0-9a-f]+ was stopped: the Parlor process that ran it ended/);
  }, 180_000);

  it('outside the sandbox, the next start kills the command Parlor left and tells the chat once', async () => {
    commandLine = `env -u PARLOR_SHELL_RUN setsid sleep ${MARKER} </dev/null >/dev/null 2>&1 & sleep ${MARKER}`;
    const { survivedTheKill, lost } = await crashWhileRunning(true);
    // Run directly, in a process group of its own, the command outlives the Parlor that started it.
    expect(survivedTheKill).toBe(true);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatch(/\[background command\] bg_[0-9a-f]+ was stopped: the Parlor process that ran it ended/);
  }, 180_000);
});
