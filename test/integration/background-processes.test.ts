// Background commands end to end: "tell me when the build is done" through a real turn, Postgres and pg-boss; the
// one wake turn its end sends; and the sweep that tells a conversation its command was lost with a Parlor process
// that died, killing what that process left running.
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createProcessStore } from '../../src/subagents/background-processes.ts';
import { shellSandboxStatus } from '../../src/tools/sandbox.ts';
import { ProcessRegistry } from '../../src/tools/processes.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { killTagged } from '../../tools/shell-process.ts';
import type { FakeReply, RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';
import { killAll, processesWith, sleep } from '../tools/shell-helpers.ts';

let h: Harness;
let processes: ProcessRegistry;
const isWake = (req: RecordedRequest) => req.lastUserText.startsWith('[background command]');
const lastRole = (req: RecordedRequest) => (req.body.messages as { role: string }[]).at(-1)!.role;
const toolResult = (req: RecordedRequest) => (req.body.messages as { role: string; content: string }[]).at(-1)!.content;

beforeAll(async () => {
  processes = new ProcessRegistry(pino({ level: 'silent' }));
  h = await startHarness({
    personas: {
      testy: { ...TEST_PERSONA, tools: { allow: ['shell_exec'], shell: shellSandboxStatus().available ? 'sandboxed' : 'unsandboxed' } },
    },
    app: { tools: createBuiltinTools({ timezone: 'UTC', processes }), processes },
  });
});
afterAll(async () => {
  killAll(['311.5', '312.5', '313.5']);
  await h?.stop();
});
beforeEach(() => {
  h.fake.reset();
  h.chat.sent.length = 0;
});

describe('background commands', () => {
  it('"tell me when the build is done": the turn answers at once, and the command\'s end brings one more message', async () => {
    h.fake.setDefault((req): FakeReply => {
      if (isWake(req)) return { text: `The build is done.\n${req.lastUserText}` };
      if (lastRole(req) === 'tool') return { text: `Started: ${toolResult(req).split('\n')[0]}` };
      return { toolCalls: [{ name: 'shell_exec', arguments: { command: 'echo compiling; sleep 2; echo build ok', yield_ms: 1000 } }] };
    });
    await h.chat.inject({ text: 'run the build and tell me when it is done' });
    const started = await until(() => h.chat.sent.find((m) => m.text.startsWith('Started:')), 'the first answer', 10_000);
    expect(started.text).toMatch(/^Started: running in the background as bg_[0-9a-f]{8}/);
    const id = /bg_[0-9a-f]+/.exec(started.text)![0];
    const done = await until(() => h.chat.sent.find((m) => m.text.startsWith('The build is done.')), 'the wake answer', 15_000);
    expect(done.chat).toBe('u1');
    expect(done.text).toContain(`[background command] ${id} finished with exit=0`);
    expect(done.text).toMatch(/Last output:\ncompiling\nbuild ok$/);
    await h.app.waitForIdle('testy:chat:u1');
    await sleep(500);
    expect(h.chat.sent.map((m) => m.text.split('\n')[0])).toEqual([started.text.split('\n')[0], 'The build is done.']);
    expect(h.fake.requests.filter(isWake)).toHaveLength(1);
    const [row] = await h.query<{ state: string; exit_status: string; tail: string }>(sql`select state, exit_status, tail from background_processes where id = ${id}`);
    expect(row).toEqual({ state: 'exited', exit_status: 'exit=0', tail: 'compiling\nbuild ok' });
    const jobs = await h.query<{ kind: string }>(sql`select data->>'kind' as kind from pgboss.job where name = 'turn' and data->>'source' = ${`process:${id}`}`);
    expect(jobs).toEqual([{ kind: 'subagent' }]);
  });

  it('a command whose Parlor process died is reported lost to its conversation once, and what it left running is killed', async () => {
    h.fake.setDefault((req): FakeReply => ({ text: isWake(req) ? `Lost: ${req.lastUserText}` : 'ok' }));
    // What a process run outside the sandbox leaves behind when Parlor is killed: a command carrying its tag.
    const tag = randomBytes(12).toString('hex');
    const orphan = spawn('sleep', ['311.5'], { detached: true, stdio: 'ignore', env: { ...process.env, PARLOR_SHELL_RUN: tag } });
    orphan.unref();
    await until(() => processesWith('311.5').length > 0, 'the orphan to start', 5_000);
    await h.query(sql`
      insert into background_processes (id, persona, conversation_id, command, origin, owner, tag)
      values ('bg_0000dead', 'testy', 'testy:chat:u1', 'make all', ${JSON.stringify({ connector: 'chat', chat: 'u1', chatType: 'dm' })}::jsonb, 'parlor:1:gone', ${tag})`);
    const store = createProcessStore({ database: h.app.database, jobs: h.app.jobs, log: pino({ level: 'silent' }), killTagged });
    expect(await store.sweepLost()).toBe(1);
    expect(await store.sweepLost()).toBe(0);
    await until(() => processesWith('311.5').length === 0, 'the orphan to be killed', 5_000);
    const lost = await until(() => h.chat.sent.find((m) => m.text.startsWith('Lost:')), 'the lost notice', 15_000);
    expect(lost.text).toContain('[background command] bg_0000dead was stopped: the Parlor process that ran it ended');
    expect(lost.text).toContain('make all');
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests.filter(isWake)).toHaveLength(1);
    const [row] = await h.query<{ state: string }>(sql`select state from background_processes where id = 'bg_0000dead'`);
    expect(row.state).toBe('lost');
  });

  it('another process\'s running command is listed from here with its state', async () => {
    await h.query(sql`
      insert into background_processes (id, persona, conversation_id, command, owner)
      values ('bg_0000beef', 'testy', 'testy:chat:u2', 'npm run watch', ${h.app.database.applicationName})`);
    h.fake.setDefault((req): FakeReply =>
      lastRole(req) === 'tool' ? { text: `status: ${toolResult(req)}` } : { toolCalls: [{ name: 'process', arguments: { action: 'read', id: 'bg_0000beef' } }] },
    );
    await h.chat.inject({ text: 'how is the watcher?', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2', name: 'Bo' } });
    const answer = await until(() => h.chat.sent.find((m) => m.text.startsWith('status:')), 'the answer', 10_000);
    expect(answer.text).toBe('status: bg_0000beef runs in another Parlor process; its output can be read there, and its status here (process status).');
    await h.query(sql`update background_processes set state = 'exited', exit_status = 'exit=0', removed_at = now() where id = 'bg_0000beef'`);
  });

  it('/stop in the chat stops its background commands too, with no wake afterwards', async () => {
    h.fake.setDefault((req): FakeReply => {
      if (isWake(req)) return { text: `woken: ${req.lastUserText}` };
      if (lastRole(req) === 'tool') return { text: 'Started the server.' };
      return { toolCalls: [{ name: 'shell_exec', arguments: { command: 'sleep 312.5', background: true } }] };
    });
    await h.chat.inject({ text: 'start the server' });
    await until(() => h.chat.sent.find((m) => m.text === 'Started the server.'), 'the answer', 10_000);
    await h.app.waitForIdle('testy:chat:u1');
    await until(() => processesWith('312.5').length > 0, 'the command', 5_000);
    await h.chat.inject({ text: '/stop' });
    const reply = await until(() => h.chat.sent.find((m) => /^Cancelled one background task\.$/.test(m.text)), () => `the /stop answer; sent ${JSON.stringify(h.chat.sent.map((m) => m.text))}`, 10_000);
    expect(reply).toBeTruthy();
    await until(() => processesWith('312.5').length === 0, 'the command to stop', 5_000);
    await until(async () => (await h.query(sql`select 1 from background_processes where command = 'sleep 312.5' and state = 'killed'`)).length === 1, 'its row to say so', 5_000);
    await sleep(1000);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests.filter(isWake)).toHaveLength(0);
  });

  it('a signal asked for in another Parlor process reaches the one that runs the command', async () => {
    const peerProcesses = new ProcessRegistry(pino({ level: 'silent' }));
    await h.startPeer({ tools: createBuiltinTools({ timezone: 'UTC', processes: peerProcesses }), processes: peerProcesses });
    const runner = new ToolRunner(createBuiltinTools({ timezone: 'UTC', processes }));
    const persona = h.app.personas[0];
    const ctx = { ...makeToolContext({ persona }), conversationId: 'testy:chat:u1', turnId: randomUUID() };
    const started = await runner.execute({ id: 'a', name: 'shell_exec', arguments: JSON.stringify({ command: 'sleep 313.5', background: true }) }, runner.toolsFor(persona, 'user'), ctx);
    expect(started.content).toMatch(/^running in the background as bg_/);
    const id = /bg_[0-9a-f]+/.exec(started.content)![0];
    await until(() => processesWith('313.5').length > 0, 'the command', 5_000);
    const caller = { persona: persona.name, conversationId: 'testy:chat:u1' };
    expect(await peerProcesses.signal(caller, id, 'SIGTERM')).toBe(`sent SIGTERM to ${id}, which runs in another Parlor process (process status shows when it has ended)`);
    await until(() => processesWith('313.5').length === 0, 'the command to stop', 5_000);
    await until(async () => (await peerProcesses.status(caller, id)).includes('exit=killed'), 'its status, seen from the other process', 5_000);
    await h.app.waitForIdle('testy:chat:u1');
  });
});
