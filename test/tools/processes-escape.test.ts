// Background commands against a command that tries to outlive its kill by shedding what Parlor finds it by, a
// shutdown racing a command on its way to the background, the persona limit under concurrent calls, another persona.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore, ProcessRegistry, type BackgroundCommand, type ProcessOwner, type ProcessStore } from '../../src/tools/processes.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { createProcessTool } from '../../tools/process.ts';
import { createShellExecTool } from '../../tools/shell-exec.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { killAll, NO_SANDBOX, processesWith, sleep, waitForProcess } from './shell-helpers.ts';

const MARKERS = ['301.5', '302.5', '303.5', '304.5'];
const log = pino({ level: 'silent' });
let root: string;
let registry: ProcessRegistry | undefined;

beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-attack-processes-'));
  fs.mkdirSync(path.join(root, 'workspace'));
});
afterEach(async () => {
  await registry?.stopAll();
  registry = undefined;
  killAll(MARKERS);
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

let calls = 0;
function harness(options: { max?: number; unsandboxed?: boolean; store?: ProcessStore } = {}) {
  const wakes: { owner: ProcessOwner; text: string }[] = [];
  registry = new ProcessRegistry(log, options.store ?? memoryStore((owner, text) => wakes.push({ owner, text })));
  const shell = createShellExecTool({ processes: registry, ...(options.unsandboxed ? { sandbox: { status: NO_SANDBOX } } : {}) });
  const runner = new ToolRunner([shell, createProcessTool(registry)]);
  const persona = makePersona({ workspace: path.join(root, 'workspace'), tools: { shell: options.unsandboxed ? 'unsandboxed' : 'sandboxed', allow: ['shell_exec'], processes: { max: options.max ?? 4 } } });
  const call = async (name: string, args: object, who: { conversationId?: string; persona?: typeof persona } = {}) => {
    const p = who.persona ?? persona;
    const ctx = { ...makeToolContext({ persona: p }), conversationId: who.conversationId ?? 'testy:chat:u1' };
    return (await runner.execute({ id: `a${calls++}`, name, arguments: JSON.stringify(args) }, runner.toolsFor(p, 'user'), ctx)).content;
  };
  return { wakes, call, persona };
}
const handleOf = (text: string) => /bg_[0-9a-f]+/.exec(text)?.[0] ?? '';

describe('a command that sheds its tag (run outside the sandbox)', () => {
  it('env -u PARLOR_SHELL_RUN setsid ... is still killed when its command ends', async () => {
    const { call } = harness({ unsandboxed: true });
    const out = await call('shell_exec', { command: 'env -u PARLOR_SHELL_RUN setsid sleep 301.5 </dev/null >/dev/null 2>&1 & echo started', timeout_ms: 5_000 });
    expect(out).toMatch(/^exit=0\nstarted/);
    await sleep(1_500);
    expect(processesWith('301.5')).toEqual([]);
  }, 20_000);

  it('env -i setsid ... in the background is still killed by process signal', async () => {
    const { call } = harness({ unsandboxed: true });
    const handle = handleOf(await call('shell_exec', { command: 'env -i setsid sleep 302.5 </dev/null >/dev/null 2>&1 & sleep 303.5', background: true }));
    await waitForProcess('302.5');
    await sleep(500);
    expect(await call('process', { action: 'signal', id: handle })).toMatch(/^stopped bg_/);
    await sleep(1_500);
    expect(processesWith('302.5')).toEqual([]);
  }, 20_000);

  it('in the sandbox the same trick dies with the command (the defence that holds)', async () => {
    const { call } = harness();
    const out = await call('shell_exec', { command: 'env -i setsid sleep 304.5 </dev/null >/dev/null 2>&1 & echo started', timeout_ms: 5_000 });
    expect(out).toMatch(/^exit=0\nstarted/);
    await sleep(1_000);
    expect(processesWith('304.5')).toEqual([]);
  }, 20_000);
});

/** A command that runs until stopped, as the registry sees one. */
function fakeCommand(): BackgroundCommand & { stops: number } {
  let end!: (exit: { status: string; notes: string[]; durationMs: number }) => void;
  const exited = new Promise<{ status: string; notes: string[]; durationMs: number }>((resolve) => (end = resolve));
  const command = {
    stops: 0,
    running: true,
    startedAt: Date.now(),
    output: { total: 0, start: 0, read: () => ({ text: '', from: 0, next: 0, dropped: 0 }), tail: () => '' },
    exited,
    stop() {
      command.stops++;
      if (!command.running) return;
      command.running = false;
      end({ status: 'killed', notes: [], durationMs: 1 });
    },
    signal() {},
    write: () => false,
  };
  return command;
}

describe('shutdown and the persona limit', () => {
  it('a command admitted while shutdown stops every command is stopped too, not left running', async () => {
    let admitted!: () => void;
    const gate = new Promise<void>((resolve) => (admitted = resolve));
    const inner = memoryStore();
    // The database takes its time to answer, as Postgres does.
    const store: ProcessStore = { ...inner, admit: async (record, max) => (await gate, inner.admit(record, max)) };
    registry = new ProcessRegistry(log, store);
    const command = fakeCommand();
    const adopting = registry.adopt(command, { persona: 'p', conversationId: 'c', command: 'sleep 1000', max: 4 });
    await sleep(10);
    const stopping = registry.stopAll();
    admitted();
    await stopping;
    const result = await adopting;
    // Either refused (and then shell_exec stops it) or taken and stopped with the rest.
    expect('refused' in result || !command.running).toBe(true);
  });

  it('concurrent background calls do not pass the persona limit (the defence that holds)', async () => {
    const { call } = harness({ max: 2 });
    const outs = await Promise.all([0, 1, 2, 3].map(() => call('shell_exec', { command: 'sleep 303.5', background: true })));
    expect(outs.filter((o) => o.startsWith('running in the background as bg_'))).toHaveLength(2);
    expect(outs.filter((o) => o.includes('2 background commands are running already'))).toHaveLength(2);
  }, 20_000);

  it("another persona with the same conversation id cannot read, write or stop the command (the defence that holds)", async () => {
    const { call } = harness();
    const handle = handleOf(await call('shell_exec', { command: 'cat; sleep 303.5', background: true }));
    const intruder = makePersona({ name: 'intruder', workspace: path.join(root, 'workspace'), tools: { shell: 'sandboxed', allow: ['shell_exec'], processes: { max: 4 } } });
    for (const args of [{ action: 'read', id: handle }, { action: 'write', id: handle, data: 'x' }, { action: 'signal', id: handle, signal: 'SIGKILL' }, { action: 'remove', id: handle }]) {
      expect(await call('process', args, { persona: intruder })).toMatch(/^error: there is no background command bg_/);
    }
    expect(await call('process', { action: 'status', id: handle })).toMatch(/running for/);
  }, 20_000);
});
