import { describe, it, expect } from 'vitest';
import { getEventListeners } from 'node:events';
import { ToolRunner, type ApprovalGate } from '#src/tools/runner.ts';
import type { Tool, ToolOutput } from '#src/tools/types.ts';
import type { ToolCall } from '#src/llm/types.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let callSeq = 0;
function call(name: string, args: unknown = {}): ToolCall {
  return { id: `call_${++callSeq}`, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

/** A tool that records whether (and with what) it ran. */
function recordingTool(name: string, result: (args: any) => string | ToolOutput | Promise<string | ToolOutput> = () => `${name} ran`, extra: Partial<Tool> = {}) {
  const runs: any[] = [];
  const tool: Tool = {
    name,
    description: `${name} for tests`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['text'],
      properties: { text: { type: 'string' }, count: { type: 'integer', minimum: 1 }, mode: { type: 'string', enum: ['fast', 'slow'] } },
    },
    async run(args) {
      runs.push(args);
      return result(args);
    },
    ...extra,
  };
  return { tool, runs };
}

const open = { type: 'object', properties: {} };

describe('ToolRunner.execute: argument problems', () => {
  it('answers unknown_tool for a tool that was not offered, naming the ones that were', async () => {
    const { tool } = recordingTool('echo');
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('rm_rf'), [tool], makeToolContext());
    expect(out.content).toMatch(/^unknown_tool: /);
    expect(out.content).toContain('"rm_rf"');
    expect(out.content).toContain('echo');
  });

  it('a tool known to the runner but not offered in this turn is still unknown_tool and does not run', async () => {
    const { tool, runs } = recordingTool('secret_tool');
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('secret_tool', { text: 'x' }), [], makeToolContext());
    expect(out.content).toMatch(/^unknown_tool: /);
    expect(runs).toHaveLength(0);
  });

  it('answers invalid_arguments for malformed JSON without running the tool', async () => {
    const { tool, runs } = recordingTool('echo');
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('echo', '{"text": "hi"'), [tool], makeToolContext());
    expect(out.content).toMatch(/^invalid_arguments: /);
    expect(out.content).toContain('not valid JSON');
    expect(out.content).toContain('echo');
    expect(runs).toHaveLength(0);
  });

  it('names the offending path for a wrong type', async () => {
    const { tool, runs } = recordingTool('echo');
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('echo', { text: 'hi', count: 'three' }), [tool], makeToolContext());
    expect(out.content).toMatch(/^invalid_arguments: /);
    expect(out.content).toContain('/count');
    expect(out.content).toContain('integer');
    expect(runs).toHaveLength(0);
  });

  it('names missing, unknown and out-of-enum properties', async () => {
    const { tool, runs } = recordingTool('echo');
    const runner = new ToolRunner([tool]);
    const ctx = makeToolContext();
    const missing = await runner.execute(call('echo', ''), [tool], ctx);
    expect(missing.content).toMatch(/^invalid_arguments: .*missing required property "text"/);
    const unknown = await runner.execute(call('echo', { text: 'a', colour: 'red' }), [tool], ctx);
    expect(unknown.content).toContain('unknown property "colour"');
    const badEnum = await runner.execute(call('echo', { text: 'a', mode: 'warp' }), [tool], ctx);
    expect(badEnum.content).toContain('/mode must be one of "fast", "slow"');
    const notObject = await runner.execute(call('echo', '[1,2]'), [tool], ctx);
    expect(notObject.content).toMatch(/^invalid_arguments: /);
    expect(runs).toHaveLength(0);
  });

  it('runs the tool with parsed arguments when they are valid', async () => {
    const { tool, runs } = recordingTool('echo', (args) => `echo: ${args.text} x${args.count}`);
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('echo', { text: 'hi', count: 2 }), [tool], makeToolContext());
    expect(out.content).toBe('echo: hi x2');
    expect(runs).toEqual([{ text: 'hi', count: 2 }]);
  });
});

describe('ToolRunner.execute: failures while running', () => {
  it('times out a tool that never resolves and aborts its own signal', async () => {
    let seen: AbortSignal | undefined;
    const hang: Tool = {
      name: 'hang',
      description: 'never finishes',
      parameters: open,
      timeoutMs: 40,
      run: (_args, ctx) => {
        seen = ctx.signal;
        return new Promise(() => {});
      },
    };
    const turn = new AbortController();
    const runner = new ToolRunner([hang]);
    const started = Date.now();
    const out = await runner.execute(call('hang'), [hang], makeToolContext({ signal: turn.signal }));
    expect(Date.now() - started).toBeLessThan(2000);
    expect(out.content).toBe('timeout: hang did not finish within 40ms and was stopped.');
    expect(seen?.aborted).toBe(true);
    expect(turn.signal.aborted).toBe(false);
  });

  it('reports a crash with the error message', async () => {
    const boom: Tool = { name: 'boom', description: 'throws', parameters: open, run: async () => { throw new Error('disk on fire'); } };
    const runner = new ToolRunner([boom]);
    const out = await runner.execute(call('boom'), [boom], makeToolContext());
    expect(out.content).toBe('crashed: boom failed: disk on fire');
  });

  it('a crash reaches the model as one line, never a stack or a long nested error', async () => {
    const nested = new Error(`Call to 'sendMessage' failed! (400: Bad Request)\n    at Api.callApi (node_modules/grammy/out/core/client.js:1:1)\n${'    at x\n'.repeat(14)}`);
    const long: Tool = { name: 'long', description: 'throws', parameters: open, run: async () => { throw nested; } };
    const wordy: Tool = { name: 'wordy', description: 'throws', parameters: open, run: async () => { throw new Error('x'.repeat(1000)); } };
    const runner = new ToolRunner([long, wordy]);
    expect((await runner.execute(call('long'), [long, wordy], makeToolContext())).content).toBe("crashed: long failed: Call to 'sendMessage' failed! (400: Bad Request)");
    expect((await runner.execute(call('wordy'), [long, wordy], makeToolContext())).content).toBe(`crashed: wordy failed: ${'x'.repeat(300)}…`);
  });

  it('reports a synchronous throw and a non-Error rejection as crashes too', async () => {
    const sync: Tool = { name: 'sync_boom', description: '', parameters: open, run: () => { throw new TypeError('bad shape'); } };
    const weird: Tool = { name: 'weird', description: '', parameters: open, run: () => Promise.reject('plain string') };
    const runner = new ToolRunner([sync, weird]);
    const ctx = makeToolContext();
    expect((await runner.execute(call('sync_boom'), [sync, weird], ctx)).content).toBe('crashed: sync_boom failed: bad shape');
    expect((await runner.execute(call('weird'), [sync, weird], ctx)).content).toBe('crashed: weird failed: plain string');
  });

  it('a call that may run again, failing while the database restarts, runs again until it is back; any other call fails at once', async () => {
    const away = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    let tries = 0;
    const keyed: Tool = { name: 'keyed', description: '', parameters: open, resumable: () => true, run: async () => (++tries < 3 ? Promise.reject(away()) : 'set') };
    let plainTries = 0;
    const plain: Tool = { name: 'plain', description: '', parameters: open, run: async () => { plainTries++; throw away(); } };
    let otherTries = 0;
    const other: Tool = { name: 'other', description: '', parameters: open, resumable: () => true, run: async () => { otherTries++; throw new Error('no such row'); } };
    const runner = new ToolRunner([keyed, plain, other]);
    const started = Date.now();
    expect((await runner.execute(call('keyed'), [keyed, plain, other], makeToolContext())).content).toBe('set');
    expect(tries).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
    expect((await runner.execute(call('plain'), [keyed, plain, other], makeToolContext())).content).toBe('crashed: plain failed: terminating connection due to administrator command');
    expect(plainTries).toBe(1);
    expect((await runner.execute(call('other'), [keyed, plain, other], makeToolContext())).content).toBe('crashed: other failed: no such row');
    expect(otherTries).toBe(1);
  });

  it('a call waiting for the database stops at its timeout and with its turn', async () => {
    const away = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    let tries = 0;
    const keyed: Tool = { name: 'keyed', description: '', parameters: open, timeoutMs: 600, resumable: () => true, run: async () => { tries++; throw away(); } };
    const runner = new ToolRunner([keyed]);
    expect((await runner.execute(call('keyed'), [keyed], makeToolContext())).content).toMatch(/^timeout: keyed did not finish/);
    const after = tries;
    await sleep(1500);
    expect(tries).toBe(after);
    const turn = new AbortController();
    setTimeout(() => turn.abort(), 300);
    expect((await runner.execute(call('keyed'), [{ ...keyed, timeoutMs: 30_000 }], makeToolContext({ signal: turn.signal }))).content).toMatch(/^cancelled: /);
  });

  it('does not run a tool when the turn was already stopped', async () => {
    const { tool, runs } = recordingTool('echo');
    const turn = new AbortController();
    turn.abort();
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('echo', { text: 'x' }), [tool], makeToolContext({ signal: turn.signal }));
    expect(out.content).toMatch(/^cancelled: /);
    expect(runs).toHaveLength(0);
  });

  it('answers cancelled when the turn stops mid-run and aborts the tool signal', async () => {
    let seen: AbortSignal | undefined;
    let markStarted!: () => void;
    const started = new Promise<void>((r) => (markStarted = r));
    const slow: Tool = {
      name: 'slow',
      description: '',
      parameters: open,
      run: (_args, ctx) => {
        seen = ctx.signal;
        markStarted();
        return sleep(5_000).then(() => 'finished anyway');
      },
    };
    const turn = new AbortController();
    const runner = new ToolRunner([slow]);
    const pending = runner.execute(call('slow'), [slow], makeToolContext({ signal: turn.signal }));
    await started;
    turn.abort();
    const out = await pending;
    expect(out.content).toBe('cancelled: the turn was stopped while slow was running.');
    expect(seen?.aborted).toBe(true);
  });
  it('leaves no listeners on the turn signal once a tool has finished (a busy turn must not leak)', async () => {
    const { tool, runs } = recordingTool('quick');
    const turn = new AbortController();
    const runner = new ToolRunner([tool]);
    const ctx = makeToolContext({ signal: turn.signal });
    for (let i = 0; i < 12; i++) await runner.execute(call('quick', { text: String(i) }), [tool], ctx);
    expect(runs).toHaveLength(12);
    // Each leftover listener is a closure per tool call; past 10 Node prints MaxListenersExceededWarning.
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0);
  });
});

describe('ToolRunner.execute: approvals', () => {
  const needsApproval = makePersona({ tools: { approve: ['danger'] } });

  it('a tool that acts on the machine asks first though the persona lists nothing, and runs unasked only under "allow"', async () => {
    const { tool, runs } = recordingTool('machine', () => 'acted');
    const asksFirst = { ...tool, approval: { byDefault: true } };
    const asked: string[] = [];
    const gate: ApprovalGate = async (r) => {
      asked.push(r.tool.name);
      return { allowed: false, reason: 'denied by test' };
    };
    const runner = new ToolRunner([asksFirst], gate);
    const plain = await runner.execute(call('machine', { text: 'x' }), [asksFirst], makeToolContext({ persona: makePersona() }));
    expect(plain.content).toBe('denied: machine did not run (denied by test).');
    expect(asked).toEqual(['machine']);
    const allowed = await runner.execute(call('machine', { text: 'x' }), [asksFirst], makeToolContext({ persona: makePersona({ tools: { allow: ['machine'] } }) }));
    expect(allowed.content).toBe('acted');
    expect(asked).toEqual(['machine']);
    expect(runs).toHaveLength(1);
  });

  it('denies an approval-required tool when there is no approval gate, without running it', async () => {
    const { tool, runs } = recordingTool('danger');
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('danger', { text: 'x' }), [tool], makeToolContext({ persona: needsApproval }));
    expect(out.content).toMatch(/^denied: danger needs a human's approval/);
    expect(runs).toHaveLength(0);
  });

  it('runs the tool when the gate allows, and hands the gate the tool and parsed args', async () => {
    const { tool, runs } = recordingTool('danger', () => 'did the dangerous thing');
    const requests: { tool: string; args: unknown }[] = [];
    const gate: ApprovalGate = async (r) => {
      requests.push({ tool: r.tool.name, args: r.args });
      return { allowed: true };
    };
    const runner = new ToolRunner([tool], gate);
    const out = await runner.execute(call('danger', { text: 'go' }), [tool], makeToolContext({ persona: needsApproval }));
    expect(out.content).toBe('did the dangerous thing');
    expect(requests).toEqual([{ tool: 'danger', args: { text: 'go' } }]);
    expect(runs).toHaveLength(1);
  });

  it('does not run the tool when the gate denies, and passes the reason on', async () => {
    const { tool, runs } = recordingTool('danger');
    const runner = new ToolRunner([tool], async () => ({ allowed: false, reason: 'the owner said no' }));
    const out = await runner.execute(call('danger', { text: 'go' }), [tool], makeToolContext({ persona: needsApproval }));
    expect(out.content).toBe('denied: danger did not run (the owner said no).');
    expect(runs).toHaveLength(0);
  });

  it('treats a failing gate as a denial', async () => {
    const { tool, runs } = recordingTool('danger');
    const runner = new ToolRunner([tool], async () => { throw new Error('approval channel offline'); });
    const out = await runner.execute(call('danger', { text: 'go' }), [tool], makeToolContext({ persona: needsApproval }));
    expect(out.content).toBe('denied: danger did not run (approval channel offline).');
    expect(runs).toHaveLength(0);
  });

  it('does not ask the gate for tools that need no approval', async () => {
    const { tool, runs } = recordingTool('harmless');
    let asked = 0;
    const runner = new ToolRunner([tool], async () => { asked++; return { allowed: false }; });
    const out = await runner.execute(call('harmless', { text: 'x' }), [tool], makeToolContext({ persona: needsApproval }));
    expect(out.content).toBe('harmless ran');
    expect(asked).toBe(0);
    expect(runs).toHaveLength(1);
  });

  it('does not run the tool when the turn is stopped while waiting for approval', async () => {
    const { tool, runs } = recordingTool('danger');
    const turn = new AbortController();
    // The user stops the turn (/stop) while the approval prompt is open; the approval then arrives.
    const runner = new ToolRunner([tool], async () => {
      turn.abort();
      return { allowed: true };
    });
    const out = await runner.execute(call('danger', { text: 'go' }), [tool], makeToolContext({ persona: needsApproval, signal: turn.signal }));
    await sleep(10);
    expect(out.content).toMatch(/^cancelled: /);
    expect(runs).toHaveLength(0);
  });
});

describe('ToolRunner.execute: output hygiene', () => {
  it('replaces persona secret values and API keys in the output with [REDACTED]', async () => {
    const secret = 'hunter2-very-secret-value';
    const key = 'sk-proj-abcdefghijklmnopqrstuvwxyz012345';
    const { tool } = recordingTool('leaky', () => `token=${secret}\nopenai=${key}\nend`);
    const runner = new ToolRunner([tool]);
    const persona = makePersona({ secrets: { SERVICE_TOKEN: secret } });
    const out = await runner.execute(call('leaky', { text: 'x' }), [tool], makeToolContext({ persona }));
    expect(out.content).toBe('token=[REDACTED]\nopenai=[REDACTED]\nend');
    expect(out.content).not.toContain('hunter2');
    expect(out.content).not.toContain('sk-proj');
  });

  it("masks the secrets a turn names besides its persona's (a task's owner's), and a secret a long crash message would cut in two", async () => {
    const secret = 'owner-secret-value-77';
    const { tool } = recordingTool('leaky', () => `found ${secret}`);
    const long: Tool = { name: 'long', description: '', parameters: open, run: async () => { throw new Error(`${'x'.repeat(290)} ${secret} and more`); } };
    const runner = new ToolRunner([tool, long]);
    const ctx = { ...makeToolContext({ persona: makePersona({ secrets: {} }) }), maskSecrets: [secret] };
    expect((await runner.execute(call('leaky', { text: 'x' }), [tool, long], ctx)).content).toBe('found [REDACTED]');
    const crashed = (await runner.execute(call('long'), [tool, long], ctx)).content;
    expect(crashed).not.toContain('owner-sec');
    expect(crashed).toMatch(/^crashed: long failed: x+ \[REDACT/);
  });

  it('scrubs secrets from crash messages and from structured outputs, keeping their flags', async () => {
    const secret = 'pa55word-for-db';
    const crash: Tool = { name: 'crash', description: '', parameters: open, run: async () => { throw new Error(`login failed for ${secret}`); } };
    const structured: Tool = { name: 'structured', description: '', parameters: open, run: async () => ({ content: `key ${secret}`, thinking: true }) };
    const runner = new ToolRunner([crash, structured]);
    const ctx = makeToolContext({ persona: makePersona({ secrets: { DB_PASSWORD: secret } }) });
    expect((await runner.execute(call('crash'), [crash, structured], ctx)).content).toBe('crashed: crash failed: login failed for [REDACTED]');
    expect(await runner.execute(call('structured'), [crash, structured], ctx)).toEqual({ content: 'key [REDACTED]', thinking: true });
  });

  it('truncates very long output and says how much was cut', async () => {
    const { tool } = recordingTool('big', () => 'y'.repeat(50_000));
    const runner = new ToolRunner([tool]);
    const out = await runner.execute(call('big', { text: 'x' }), [tool], makeToolContext());
    expect(out.content.length).toBeLessThan(33_000);
    expect(out.content.startsWith('y'.repeat(32_000))).toBe(true);
    expect(out.content).toMatch(/\[truncated: 18000 more characters\]$/);
  });

  it('leaves output under the limit untouched', async () => {
    const text = 'z'.repeat(31_999);
    const { tool } = recordingTool('medium', () => text);
    const runner = new ToolRunner([tool]);
    expect((await runner.execute(call('medium', { text: 'x' }), [tool], makeToolContext())).content).toBe(text);
  });
});

describe('ToolRunner.toolsFor and specs', () => {
  const plain: Tool = { name: 'plain', description: 'always', parameters: open, run: async () => '' };
  const userOnly: Tool = { name: 'user_only', description: 'user turns', parameters: open, contexts: ['user'], run: async () => '' };
  const background: Tool = { name: 'background_only', description: 'bg', parameters: open, contexts: ['cron', 'heartbeat'], run: async () => '' };
  const needsKey: Tool = {
    name: 'needs_key',
    description: 'needs a secret',
    parameters: open,
    available: ({ persona }) => Boolean(persona.secrets.WEATHER_KEY),
    run: async () => '',
  };
  const runner = new ToolRunner([plain, userOnly, background, needsKey]);
  const names = (tools: Tool[]) => tools.map((t) => t.name);

  it('filters by turn kind', () => {
    const persona = makePersona();
    expect(names(runner.toolsFor(persona, 'user'))).toEqual(['plain', 'user_only']);
    expect(names(runner.toolsFor(persona, 'cron'))).toEqual(['plain', 'background_only']);
    expect(names(runner.toolsFor(persona, 'wake'))).toEqual(['plain']);
  });

  it("drops tools the persona denies", () => {
    const persona = makePersona({ tools: { deny: ['plain', 'user_only'] } });
    expect(names(runner.toolsFor(persona, 'user'))).toEqual([]);
  });

  it('asks available() with the persona and kind', () => {
    const withKey = makePersona({ secrets: { WEATHER_KEY: 'abcdef123' } });
    expect(names(runner.toolsFor(withKey, 'user'))).toEqual(['plain', 'user_only', 'needs_key']);
    expect(names(runner.toolsFor(makePersona(), 'user'))).not.toContain('needs_key');
  });

  it('specs carry name, description and parameters only', () => {
    expect(runner.specs([userOnly])).toEqual([{ name: 'user_only', description: 'user turns', parameters: open }]);
  });
});

describe('ToolRunner.execute: remote methods', () => {
  const asking = (delayMs: number, timeoutMs: number, work = 0): Tool => ({
    name: 'asks',
    description: 'asks a person',
    parameters: open,
    timeoutMs,
    async run(_args, ctx) {
      const answer = await ctx.remoteMethod({ method: 'pick', choices: ['a', 'b'] });
      await sleep(work);
      return `got ${String(answer)}`;
    },
  });

  it("does not count the time a person takes against the tool's timeout", async () => {
    const tool = asking(0, 100);
    const ctx = { ...makeToolContext(), remoteMethod: () => sleep(300).then(() => 'b') };
    const output = await new ToolRunner([tool]).execute(call('asks'), [tool], ctx);
    expect(output.content).toBe('got b');
  });

  it('still times out on work done after the answer', async () => {
    const tool = asking(0, 100, 400);
    const ctx = { ...makeToolContext(), remoteMethod: () => sleep(50).then(() => 'a') };
    const output = await new ToolRunner([tool]).execute(call('asks'), [tool], ctx);
    expect(output.content).toMatch(/^timeout:/);
  });

  it("waits on the tool's own signal, which ends with the turn", async () => {
    const turn = new AbortController();
    let seen: AbortSignal | undefined;
    const tool = asking(0, 5000);
    const ctx = {
      ...makeToolContext({ signal: turn.signal }),
      remoteMethod: (request: { signal?: AbortSignal }) => {
        seen = request.signal;
        return new Promise((_resolve, reject) => request.signal!.addEventListener('abort', () => reject(new Error('stopped'))));
      },
    };
    const pending = new ToolRunner([tool]).execute(call('asks'), [tool], ctx as never);
    await sleep(20);
    expect(seen).toBeDefined();
    expect(seen).not.toBe(turn.signal);
    turn.abort('stop');
    expect((await pending).content).toMatch(/^cancelled:/);
    expect(seen!.aborted).toBe(true);
  });
});
