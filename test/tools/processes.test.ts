// Background commands: shell_exec past its yield hands back a bg_ handle, the process tool reads, writes and stops
// it, and its conversation is woken once when it ends. Run in the sandbox where bubblewrap works, directly otherwise.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { shellSandboxStatus } from '../../src/tools/sandbox.ts';
import { memoryStore, ProcessRegistry, type ProcessOwner } from '../../src/tools/processes.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { createProcessTool } from '../../tools/process.ts';
import { createShellExecTool } from '../../tools/shell-exec.ts';
import { OutputBuffer } from '../../tools/shell-process.ts';
import { createTaskCancelTool } from '../../tools/task-cancel.ts';
import { createTaskStatusTool } from '../../tools/task-status.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';
import { killAll, processesWith, sleep, waitForProcess } from './shell-helpers.ts';

const sandboxed = shellSandboxStatus().available;
const MARKERS = ['201.5', '202.5', '203.5', '204.5', '205.5', '206.5'];
const log = pino({ level: 'silent' });

let root: string;
let persona: ReturnType<typeof makePersona>;
let wakes: { owner: ProcessOwner; text: string }[];
let registry: ProcessRegistry;
let runner: ToolRunner;

function setUp(max = 4) {
  wakes = [];
  registry = new ProcessRegistry(log, memoryStore((owner, text) => wakes.push({ owner, text })));
  runner = new ToolRunner([createShellExecTool({ processes: registry }), createProcessTool(registry), createTaskStatusTool(registry), createTaskCancelTool(registry)]);
  persona = makePersona({ workspace: path.join(root, 'workspace'), tools: { shell: sandboxed ? 'sandboxed' : 'unsandboxed', allow: ['shell_exec'], processes: { max } } });
}

beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-processes-'));
  fs.chmodSync(root, 0o755);
  fs.mkdirSync(path.join(root, 'workspace'));
});
afterEach(async () => {
  await registry?.stopAll();
  killAll(MARKERS);
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

let calls = 0;
async function call(name: string, args: object, options: { conversationId?: string; kind?: 'user' | 'task' } = {}): Promise<string> {
  const ctx = { ...makeToolContext({ persona, kind: options.kind ?? 'user' }), conversationId: options.conversationId ?? 'testy:chat:u1' };
  const out = await runner.execute({ id: `c${calls++}`, name, arguments: JSON.stringify(args) }, runner.toolsFor(persona, options.kind ?? 'user'), ctx);
  return out.content;
}
const handleOf = (text: string) => /bg_[0-9a-f]+/.exec(text)?.[0] ?? '';

describe('shell_exec in the background', () => {
  it('a command still running after yield_ms returns its handle and output so far; its end wakes the conversation once', async () => {
    setUp();
    const started = Date.now();
    const out = await call('shell_exec', { command: 'echo started; sleep 2; echo done', yield_ms: 1000 });
    expect(Date.now() - started).toBeLessThan(1900);
    expect(out).toMatch(/^running in the background as bg_[0-9a-f]{8} \(after 1s; stopped after 30m00s at most\)\nstarted\n\[8 bytes so far: process read bg_[0-9a-f]+ since=8 for more; you will get a message here when it exits\]$/);
    const id = handleOf(out);
    expect(await call('process', { action: 'status', id })).toMatch(new RegExp(`^${id} {2}running for \\ds {2}echo started; sleep 2; echo done$`));
    await until(() => wakes.length > 0, 'the wake', 10_000);
    await sleep(300);
    expect(wakes).toHaveLength(1);
    expect(wakes[0].owner).toMatchObject({ persona: 'tester', conversationId: 'testy:chat:u1' });
    expect(wakes[0].text).toMatch(new RegExp(`^\\[background command\\] ${id} finished with exit=0 after 2s: echo started; sleep 2; echo done\nLast output:\nstarted\ndone$`));
    expect(await call('process', { action: 'read', id })).toMatch(new RegExp(`^${id} {2}exit=0 after 2s {2}.*\nbytes 0-13 of 13\nstarted\ndone$`));
    expect(await call('process', { action: 'read', id, since: 8 })).toMatch(/\nbytes 8-13 of 13\ndone$/);
  });

  it('a command that ends within its yield is an ordinary result, with no handle and no wake', async () => {
    setUp();
    expect(await call('shell_exec', { command: 'echo quick', yield_ms: 5000 })).toBe('exit=0\nquick');
    await sleep(200);
    expect(wakes).toEqual([]);
    expect(await call('process', { action: 'list' })).toBe('No background commands in this conversation.');
  });

  it('background=true goes at once and keeps stdin open for process write', async () => {
    setUp();
    const out = await call('shell_exec', { command: 'read line; echo "got $line"; cat', background: true });
    expect(out).toMatch(/^running in the background as bg_[0-9a-f]+ \(after 0s/);
    const id = handleOf(out);
    expect(await call('process', { action: 'write', id, data: 'hello\n' })).toBe(`wrote 6 bytes to ${id}`);
    await until(async () => (await call('process', { action: 'read', id })).includes('got hello'), 'the echo', 5_000);
    expect(await call('process', { action: 'write', id, data: 'tail\n', eof: true })).toBe(`wrote 5 bytes to ${id} and closed its input`);
    await until(() => wakes.length === 1, 'the wake after end of input', 5_000);
    expect(wakes[0].text).toContain('exit=0');
    expect(wakes[0].text).toMatch(/got hello\ntail$/);
  });

  it('a command backgrounded by its yield has no stdin: write says so', async () => {
    setUp();
    const id = handleOf(await call('shell_exec', { command: 'sleep 201.5', yield_ms: 1000 }));
    expect(await call('process', { action: 'write', id, data: 'x' })).toMatch(/has no input open: only a command started with shell_exec background=true keeps its stdin/);
  });

  it('signal SIGTERM stops the whole tree, children started with & and setsid included, and wakes once with the status', async () => {
    setUp();
    const id = handleOf(await call('shell_exec', { command: 'sleep 202.5 & setsid sleep 203.5 & sleep 204.5', background: true }));
    await waitForProcess('202.5');
    await waitForProcess('203.5');
    expect(await call('process', { action: 'signal', id })).toBe(`stopped ${id} (exit=killed)`);
    expect(processesWith('202.5')).toEqual([]);
    expect(processesWith('203.5')).toEqual([]);
    expect(processesWith('204.5')).toEqual([]);
    await until(() => wakes.length === 1, 'the wake', 5_000);
    expect(wakes[0].text).toMatch(new RegExp(`^\\[background command\\] ${id} finished with exit=killed after \\ds: `));
    expect(wakes[0].text).toContain('[killed on request]');
  });

  it('remove stops a running command and sends no wake; the handle is gone afterwards', async () => {
    setUp();
    const id = handleOf(await call('shell_exec', { command: 'sleep 205.5', background: true }));
    expect(await call('process', { action: 'remove', id })).toBe(`removed ${id}`);
    expect(processesWith('205.5')).toEqual([]);
    await sleep(300);
    expect(wakes).toEqual([]);
    expect(await call('process', { action: 'status', id })).toMatch(/^error: there is no background command bg_[0-9a-f]+ in this conversation/);
  });

  it('another conversation cannot see, read or stop it', async () => {
    setUp();
    const id = handleOf(await call('shell_exec', { command: 'sleep 206.5', background: true }));
    for (const action of ['status', 'read', 'signal', 'remove'] as const) {
      expect(await call('process', { action, id }, { conversationId: 'testy:chat:other' })).toMatch(/^error: there is no background command/);
    }
    expect(await call('process', { action: 'list' }, { conversationId: 'testy:chat:other' })).toBe('No background commands in this conversation.');
    expect(processesWith('206.5').length).toBeGreaterThan(0);
    expect(await call('process', { action: 'list' })).toContain(id);
  });

  it('at the persona limit, background=true is refused and a long command waits in the foreground', async () => {
    setUp(1);
    const first = await call('shell_exec', { command: 'sleep 201.5', background: true });
    expect(first).toMatch(/^running in the background/);
    expect(await call('shell_exec', { command: 'sleep 202.5', background: true })).toBe(
      'error: the command cannot go to the background: 1 background command is running already (stop one with process signal, or wait); it was stopped.',
    );
    const waited = await call('shell_exec', { command: 'sleep 1.5; echo finished', yield_ms: 1000 });
    expect(waited).toBe('exit=0\nfinished\n[it could not go on in the background: 1 background command is running already (stop one with process signal, or wait)]');
  });

  it('a database that does not answer keeps the command in the foreground, to its end', async () => {
    setUp();
    const failing = new ProcessRegistry(log, { ...memoryStore(), admit: () => Promise.reject(new Error('connection refused')) });
    runner = new ToolRunner([createShellExecTool({ processes: failing })]);
    const out = await call('shell_exec', { command: 'sleep 1.5; echo end', yield_ms: 1000 });
    expect(out).toBe('exit=0\nend\n[it could not go on in the background: it could not be recorded (the database did not answer)]');
  });

  it('a task turn runs its command to the end: no background there', async () => {
    setUp();
    const out = await call('shell_exec', { command: 'sleep 1.5; echo end', yield_ms: 1000 }, { kind: 'task' });
    expect(out).toBe('exit=0\nend');
  });

  it('task_status lists background commands and task_cancel stops one', async () => {
    setUp();
    const id = handleOf(await call('shell_exec', { command: 'sleep 203.5', background: true }));
    expect(await call('task_status', {})).toContain(`${id}  running for`);
    expect(await call('task_status', { handle: id })).toMatch(new RegExp(`^${id} {2}running for`));
    expect(await call('task_cancel', { handle: id })).toBe(`stopped ${id} (exit=killed)`);
    expect(processesWith('203.5')).toEqual([]);
  });

  it('shutdown stops every background command and tells each conversation', async () => {
    setUp();
    const id = handleOf(await call('shell_exec', { command: 'sleep 204.5', background: true }));
    await registry.stopAll();
    expect(processesWith('204.5')).toEqual([]);
    expect(wakes).toHaveLength(1);
    expect(wakes[0].text).toMatch(new RegExp(`^\\[background command\\] ${id} was stopped because Parlor shut down`));
    expect(await call('shell_exec', { command: 'sleep 205.5', background: true })).toMatch(/cannot go to the background: Parlor is shutting down/);
  });

  it('a command in the background outlives the turn that started it', async () => {
    setUp();
    const turn = new AbortController();
    const ctx = { ...makeToolContext({ persona, signal: turn.signal }), conversationId: 'testy:chat:u1' };
    const out = await runner.execute({ id: 'x', name: 'shell_exec', arguments: JSON.stringify({ command: 'sleep 1; echo survived', yield_ms: 1000 }) }, runner.toolsFor(persona, 'user'), ctx);
    turn.abort();
    expect(out.content).toMatch(/^running in the background/);
    await until(() => wakes.length === 1, 'the wake', 5_000);
    expect(wakes[0].text).toMatch(/exit=0[\s\S]*survived$/);
  });
});

describe('OutputBuffer', () => {
  it('keeps the first bytes and a rolling window addressed by offsets, and says how much was dropped', () => {
    const buffer = new OutputBuffer(10, 20);
    for (let i = 0; i < 5; i++) buffer.push(Buffer.from(`${i}`.repeat(10)));
    expect(buffer.total).toBe(50);
    expect(buffer.headText()).toEqual({ text: '0000000000', dropped: 40 });
    expect(buffer.start).toBeGreaterThanOrEqual(30);
    const part = buffer.read(0, 100);
    expect(part.dropped).toBe(buffer.start);
    expect(part.text.endsWith('4444444444')).toBe(true);
    expect(part.next).toBe(50);
    expect(buffer.read(45, 3)).toEqual({ text: '444', from: 45, next: 48, dropped: 0 });
    expect(buffer.tail(4)).toBe('4444');
  });
});
