import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Persona } from '#src/config/persona.ts';
import type { ApprovalGate } from '#src/tools/runner.ts';
import { detectShellIsolation, shellSandboxStatus, type SandboxStatus } from '#src/tools/sandbox.ts';
import type { Tool } from '#src/tools/types.ts';
import { createCustomToolProvider } from '#src/tools/custom/provider.ts';
import { createCustomToolCommands } from '../../tools/shell-exec.ts';
import { makeToolContext } from '../support/persona.ts';
import { callTool, makeScratch, recordingLog, stringParams, writeTool, type Scratch } from '../fixtures/custom-tools/tools.ts';
import { killAll, NO_SANDBOX, processesWith, sleep, waitForProcess } from './shell-helpers.ts';

const sandboxed = shellSandboxStatus().available;
const isRoot = process.getuid?.() === 0;
// Root without bubblewrap (looked for where there is none) runs commands as a user of their own.
const asUserStatus = isRoot ? detectShellIsolation({ path: '/nonexistent-parlor-test-bin' }) : undefined;
const MARKERS = ['141.5', '142.5', '143.5', '144.5', '145.5', '146.5'];

let scratch: Scratch;

beforeEach(() => {
  scratch = makeScratch({
    secrets: { API_TOKEN: 'tok-not-really-secret-123', OTHER_SECRET: 'other-not-really-456' },
    tools: { shell: sandboxed ? 'sandboxed' : 'unsandboxed' },
  });
});
afterEach(() => scratch.remove());
afterAll(() => killAll(MARKERS));

function providerFor(status?: () => SandboxStatus, hide: string[] = []) {
  return createCustomToolProvider({ sharedDir: scratch.sharedDir, reservedNames: ['shell_exec'], commands: createCustomToolCommands({ status, hide }), log: recordingLog().log });
}

async function toolsOf(persona: Persona = scratch.persona, status?: () => SandboxStatus) {
  return providerFor(status).tools(persona);
}

/** The tool's own result, not through the runner (which masks the persona's secrets). */
async function runRaw(tools: Tool[], name: string, args: Record<string, unknown>, persona: Persona = scratch.persona): Promise<string> {
  const tool = tools.find((t) => t.name === name)!;
  return (await tool.run(args, makeToolContext({ persona }))) as string;
}

const BASH_TOOL = '#!/bin/bash\ninput=$(cat)\necho "bash got $input in $PWD"\n';
const NODE_TOOL = `#!/usr/bin/env node
let data = '';
process.stdin.on('data', (chunk) => (data += chunk)).on('end', () => {
  const args = JSON.parse(data);
  console.error('a warning on stderr, not in the result');
  if (args.a < 0) {
    console.error('negative numbers are not allowed');
    process.exit(3);
  }
  process.stdout.write(JSON.stringify({ sum: args.a + args.b, cwd: process.cwd(), token: process.env.API_TOKEN?.length ?? null }));
});
`;
const numbers = { type: 'object', required: ['a', 'b'], properties: { a: { type: 'number' }, b: { type: 'number' } } };

function writeLanguageTools() {
  writeTool(scratch.own, 'bash-echo', { name: 'bash_echo', description: 'Echoes its input.', parameters: stringParams('text'), run: './run.sh' }, { 'run.sh': BASH_TOOL });
  writeTool(scratch.sharedDir, 'node-sum', { name: 'node_sum', description: 'Adds.', parameters: numbers, run: './sum.js', secrets: ['API_TOKEN'] }, { 'sum.js': NODE_TOOL });
}

const modes: [string, () => Persona, (() => SandboxStatus) | undefined][] = [
  ['in the sandbox (or directly, where there is none)', () => scratch.persona, undefined],
  ['run directly', () => ({ ...scratch.persona, tools: { ...scratch.persona.tools, shell: 'unsandboxed' } }), NO_SANDBOX],
  ...(isRoot ? [['as a user of its own', () => scratch.persona, () => asUserStatus!] as [string, () => Persona, () => SandboxStatus]] : []),
];

describe.each(modes)('custom tools in Bash and Node, %s', (_, persona, status) => {
  it('runs a Bash tool and a Node tool with the arguments on stdin, in the workspace, the result their stdout', async () => {
    writeLanguageTools();
    const tools = await toolsOf(persona(), status);
    const ctx = makeToolContext({ persona: persona() });
    const workspace = fs.realpathSync(scratch.persona.workspace);
    expect(await callTool(tools, 'bash_echo', { text: 'hi "there"' }, ctx)).toBe(`bash got {"text":"hi \\"there\\""} in ${workspace}`);
    expect(JSON.parse(await callTool(tools, 'node_sum', { a: 2, b: 3 }, ctx))).toEqual({ sum: 5, cwd: workspace, token: 25 });
    expect(await callTool(tools, 'node_sum', { a: -1, b: 3 }, ctx)).toBe(
      'error: node_sum failed (exit=3)\n[stderr]\na warning on stderr, not in the result\nnegative numbers are not allowed',
    );
  });

  it('checks the arguments before anything runs', async () => {
    writeLanguageTools();
    const tools = await toolsOf(persona(), status);
    const ctx = makeToolContext({ persona: persona() });
    expect(await callTool(tools, 'node_sum', { a: 'two', b: 3 }, ctx)).toBe('invalid_arguments: /a must be number. Fix the arguments and call node_sum again.');
    expect(await callTool(tools, 'bash_echo', {}, ctx)).toMatch(/^invalid_arguments: \(arguments\): missing required property "text"/);
  });
});

describe('custom tools: what reaches the command', () => {
  const HOSTILE = [
    '; rm -rf ~',
    '$(touch pwned)',
    '`touch pwned`',
    "it's 'single' quoted",
    'say "double" quotes',
    'both \' and " and $HOME and `x`',
    'line one\nline two\n',
    '\\ back\\slash \\',
    '-n',
    '*',
    '~',
    '!! and !x',
    '',
    'héllo ✓',
    '&& touch pwned || touch pwned | touch pwned > pwned',
  ];

  it('escapes hostile values so they arrive byte-exact and nothing they say runs', async () => {
    writeTool(scratch.own, 'keep', {
      name: 'keep',
      description: 'Keeps a value.',
      parameters: { type: 'object', required: ['value'], properties: { value: { type: 'string' }, data: { type: 'object' }, count: { type: 'integer' } } },
      command: "printf '%s' {{value}} > got.txt; printf '%s' {{ data }} > data.json; printf '%s' {{count}} > count.txt",
    });
    const tools = await toolsOf();
    const ctx = makeToolContext({ persona: scratch.persona });
    const workspace = scratch.persona.workspace;
    for (const value of HOSTILE) {
      expect(await callTool(tools, 'keep', { value }, ctx)).toBe('(no output)');
      expect(fs.readFileSync(path.join(workspace, 'got.txt'), 'utf8')).toBe(value);
      expect(fs.readFileSync(path.join(workspace, 'data.json'), 'utf8')).toBe('');
    }
    const data = { q: "it's $(touch pwned)", list: [1, '`touch pwned`'], nested: { nl: 'a\nb' } };
    await callTool(tools, 'keep', { value: 'x', data, count: 42 }, ctx);
    expect(JSON.parse(fs.readFileSync(path.join(workspace, 'data.json'), 'utf8'))).toEqual(data);
    expect(fs.readFileSync(path.join(workspace, 'count.txt'), 'utf8')).toBe('42');
    expect(fs.readdirSync(workspace).sort()).toEqual(['count.txt', 'data.json', 'got.txt']);
    expect(fs.existsSync(path.join(scratch.persona.dir, '.env'))).toBe(true);
  });

  it('passes the secrets a tool declares by name, and neither the others nor Parlor\'s own environment', async () => {
    const saved = { DATABASE_URL: process.env.DATABASE_URL, PARLOR_TEST_LEAK: process.env.PARLOR_TEST_LEAK };
    process.env.DATABASE_URL = 'postgres://parlor:db-password@localhost/parlor';
    process.env.PARLOR_TEST_LEAK = 'leaked';
    try {
      writeTool(scratch.own, 'envy', { name: 'envy', description: 'Shows its environment.', parameters: { type: 'object' }, command: 'env', secrets: ['API_TOKEN'] });
      writeTool(scratch.own, 'needy', { name: 'needy', description: 'Needs a secret.', parameters: { type: 'object' }, command: 'true', secrets: ['API_TOKEN', 'MISSING_ONE'] });
      const tools = await toolsOf();
      const env = await runRaw(tools, 'envy', {});
      expect(env.split('\n')).toContain('API_TOKEN=tok-not-really-secret-123');
      expect(env).toMatch(/^PATH=/m);
      expect(env).not.toContain('OTHER_SECRET');
      expect(env).not.toContain('other-not-really-456');
      expect(env).not.toContain('DATABASE_URL');
      expect(env).not.toContain('db-password');
      expect(env).not.toContain('PARLOR_TEST_LEAK');
      // Through the runner, the value is masked in what the model reads.
      expect(await callTool(tools, 'envy', {}, makeToolContext({ persona: scratch.persona }))).not.toContain('tok-not-really-secret-123');
      expect(await runRaw(tools, 'needy', {})).toBe("error: needy needs the secret MISSING_ONE, which persona ana's .env does not have; it did not run.");
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it.runIf(sandboxed)('shows the tool its own folder read-only in the sandbox, and not the persona folder around it', async () => {
    const script = '#!/bin/sh\nhere=$(dirname "$0")\ncat "$here/../../.env" 2>/dev/null || echo "no .env"\ntouch "$here/new" 2>/dev/null || echo "read-only"\ncat "$here/data.txt"\n';
    const dir = writeTool(scratch.own, 'peek', { name: 'peek', description: 'Peeks.', parameters: { type: 'object' }, run: './peek.sh' }, { 'peek.sh': script });
    fs.writeFileSync(path.join(dir, 'data.txt'), 'beside the script');
    const tools = await providerFor(undefined, [scratch.personasDir]).tools(scratch.persona);
    expect(await runRaw(tools, 'peek', {})).toBe('no .env\nread-only\nbeside the script');
    expect(fs.existsSync(path.join(dir, 'new'))).toBe(false);
  });

  it('cuts the output at shell_exec\'s cap and says how much more there was', async () => {
    writeTool(scratch.own, 'big', { name: 'big', description: 'Prints a lot.', parameters: { type: 'object' }, command: 'yes | head -c 100000' });
    const out = await callTool(await toolsOf(), 'big', {}, makeToolContext({ persona: scratch.persona }));
    expect(out.endsWith(`\n[output truncated: ${100_000 - 16_384} more bytes]`)).toBe(true);
    expect(out.length).toBeLessThan(17_000);
  });
});

describe('custom tools: a placeholder wherever it stands in the template', () => {
  // The arguments reach the shell as variables: a value is never read as shell code, in a here-document, backticks,
  // a command substitution or a comment, and an optional argument left out is no word at all.
  it.each([
    ['a here-document', 'cat <<EOF\nvalue: {{x}}\nEOF', 'a $(touch pwned) `touch pwned`', 'value: a $(touch pwned) `touch pwned`'],
    ['backticks', 'echo `printf %s {{x}}`', "it's `touch pwned`", "it's `touch pwned`"],
    ['a command substitution', 'v=$(printf %s {{x}}); printf %s "$v"', 'a"; touch pwned; echo "', 'a"; touch pwned; echo "'],
    ['a comment', 'printf %s {{x}} # {{x}}', 'a\ntouch pwned #', 'a\ntouch pwned #'],
  ])('in %s', async (_, command, value, expected) => {
    writeTool(scratch.own, 'probe', { name: 'probe', description: 'p', parameters: stringParams('x'), command });
    const tools = await toolsOf();
    expect(await callTool(tools, 'probe', { x: value }, makeToolContext({ persona: scratch.persona }))).toBe(expected);
    expect(fs.existsSync(path.join(scratch.persona.workspace, 'pwned'))).toBe(false);
  });

  it('an optional argument left out is no word, and one given empty is an empty word', async () => {
    writeTool(scratch.own, 'count', { name: 'count', description: 'c', parameters: { type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } } }, command: 'f() { echo $#; }; f {{a}} {{b}}' });
    const tools = await toolsOf();
    const ctx = makeToolContext({ persona: scratch.persona });
    expect(await callTool(tools, 'count', { a: 'x' }, ctx)).toBe('1');
    expect(await callTool(tools, 'count', { a: 'x', b: '' }, ctx)).toBe('2');
    expect(await callTool(tools, 'count', {}, ctx)).toBe('0');
  });

  it('refuses arguments too long for a command, saying what to do instead', async () => {
    writeTool(scratch.own, 'echoer', { name: 'echoer', description: 'e', parameters: stringParams('x'), command: 'printf %s {{x}} | wc -c' });
    const tools = await toolsOf();
    const started = Date.now();
    const out = await callTool(tools, 'echoer', { x: 'y'.repeat(200_000) }, makeToolContext({ persona: scratch.persona }));
    expect(out).toMatch(/^error: the arguments are 200000 characters, more than a command takes \(100000\); a tool with "run" reads its arguments from stdin instead; echoer did not run\.$/);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await callTool(tools, 'echoer', { x: 'y'.repeat(50_000) }, makeToolContext({ persona: scratch.persona }))).toBe('50000');
  });
});

describe('custom tools: stopping', () => {
  async function gone(marker: string): Promise<number[]> {
    for (let i = 0; i < 50 && processesWith(marker).length; i++) await sleep(100);
    return processesWith(marker);
  }

  it('kills a tool that runs past its timeout, with everything it started', async () => {
    writeTool(scratch.own, 'slow', { name: 'slow', description: 'Slow.', parameters: { type: 'object' }, command: 'echo started; sleep 141.5 & sleep 142.5; echo never', timeout: 1 });
    writeTool(scratch.own, 'slow-run', { name: 'slow_run', description: 'Slow.', parameters: { type: 'object' }, run: './run.sh', timeout: 1 }, { 'run.sh': '#!/bin/sh\n(setsid sleep 143.5 &)\nsleep 144.5\n' });
    const tools = await toolsOf();
    const ctx = makeToolContext({ persona: scratch.persona });
    const started = Date.now();
    expect(await callTool(tools, 'slow', {}, ctx)).toBe('timeout: slow did not finish in time and was stopped\nstarted\n[killed after 1s: timed out]');
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(await gone('141.5')).toEqual([]);
    expect(await gone('142.5')).toEqual([]);
    expect(await callTool(tools, 'slow_run', {}, ctx)).toMatch(/^timeout: slow_run did not finish in time and was stopped\n\[killed after 1s: timed out\]$/);
    expect(await gone('143.5')).toEqual([]);
    expect(await gone('144.5')).toEqual([]);
  });

  it('kills the whole tree when the turn stops', async () => {
    writeTool(scratch.own, 'hang', { name: 'hang', description: 'Hangs.', parameters: { type: 'object' }, command: 'sleep 145.5 & sleep 146.5' });
    const tools = await toolsOf();
    const turn = new AbortController();
    const result = callTool(tools, 'hang', {}, makeToolContext({ persona: scratch.persona, signal: turn.signal }));
    await waitForProcess('146.5');
    turn.abort();
    expect(await result).toBe('cancelled: the turn was stopped while hang was running.');
    expect(await gone('145.5')).toEqual([]);
    expect(await gone('146.5')).toEqual([]);
  });
});

describe('custom tools: approval, deny patterns, availability', () => {
  function recordingGate(allowed: boolean) {
    const asked: string[] = [];
    const gate: ApprovalGate = async ({ tool }) => {
      asked.push(tool.name);
      return allowed ? { allowed: true } : { allowed: false, reason: 'denied by tester' };
    };
    return { gate, asked };
  }

  it('asks before each call of a tool with "approve": true, and a denied call does not run', async () => {
    writeTool(scratch.own, 'gated', { name: 'gated', description: 'Leaves a mark.', parameters: stringParams('mark'), command: 'touch {{mark}}', approve: true });
    writeTool(scratch.own, 'free', { name: 'free', description: 'Leaves a mark.', parameters: stringParams('mark'), command: 'touch {{mark}}' });
    const tools = await toolsOf();
    expect(tools.find((t) => t.name === 'gated')!.approval?.byDefault).toBe(true);
    const ctx = makeToolContext({ persona: scratch.persona });
    const mark = (name: string) => fs.existsSync(path.join(scratch.persona.workspace, name));

    const deny = recordingGate(false);
    expect(await callTool(tools, 'gated', { mark: 'denied-ran' }, ctx, deny.gate)).toBe('denied: gated did not run (denied by tester).');
    expect(deny.asked).toEqual(['gated']);
    expect(mark('denied-ran')).toBe(false);

    const allow = recordingGate(true);
    expect(await callTool(tools, 'gated', { mark: 'allowed-ran' }, ctx, allow.gate)).toBe('(no output)');
    expect(await callTool(tools, 'gated', { mark: 'allowed-again' }, ctx, allow.gate)).toBe('(no output)');
    expect(allow.asked).toEqual(['gated', 'gated']);
    expect(mark('allowed-ran') && mark('allowed-again')).toBe(true);

    // Listed under "allow", or without "approve", it runs unasked.
    const trusting = { ...scratch.persona, tools: { ...scratch.persona.tools, allow: ['gated'] } };
    const unasked = recordingGate(false);
    expect(await callTool(tools, 'gated', { mark: 'trusted-ran' }, makeToolContext({ persona: trusting }), unasked.gate)).toBe('(no output)');
    expect(await callTool(tools, 'free', { mark: 'free-ran' }, ctx, unasked.gate)).toBe('(no output)');
    expect(unasked.asked).toEqual([]);
    expect(mark('trusted-ran') && mark('free-ran')).toBe(true);
  });

  it('refuses an expanded command that matches shell_exec\'s deny patterns, before anyone is asked', async () => {
    writeTool(scratch.own, 'wipe', { name: 'wipe', description: 'Deletes a folder.', parameters: stringParams('folder'), command: 'rm -rf {{folder}}', approve: true });
    fs.mkdirSync(path.join(scratch.persona.workspace, 'junk'));
    const tools = await toolsOf();
    const ctx = makeToolContext({ persona: scratch.persona });
    const gate = recordingGate(true);
    const out = await callTool(tools, 'wipe', { folder: '/' }, ctx, gate.gate);
    expect(out).toMatch(/^denied: .*recursively deleting.*; wipe did not run\.$/);
    expect(gate.asked).toEqual([]);
    // Called directly (no runner), the tool refuses it too.
    expect(await runRaw(tools, 'wipe', { folder: '/' })).toMatch(/^denied: .*; wipe did not run\.$/);
    expect(await callTool(tools, 'wipe', { folder: 'junk' }, ctx, gate.gate)).toBe('(no output)');
    expect(gate.asked).toEqual(['wipe']);
    expect(fs.existsSync(path.join(scratch.persona.workspace, 'junk'))).toBe(false);
  });

  it('is offered where shell_exec could run, and not turned off by a deny of shell_exec', async () => {
    writeTool(scratch.own, 'hello', { name: 'hello', description: 'Hi.', parameters: { type: 'object' }, command: 'echo hi' });
    const [tool] = await toolsOf(scratch.persona, NO_SANDBOX);
    const notOptedIn = { ...scratch.persona, tools: { ...scratch.persona.tools, shell: 'sandboxed' as const } };
    const optedIn = { ...scratch.persona, tools: { ...scratch.persona.tools, shell: 'unsandboxed' as const, deny: ['shell_exec'] } };
    expect(tool!.available!({ persona: notOptedIn, kind: 'user' })).toBe(false);
    expect(await runRaw([tool!], 'hello', {}, notOptedIn)).toMatch(/^error: shell_exec is off for persona ana: .*; hello did not run\.$/);
    expect(tool!.available!({ persona: optedIn, kind: 'user' })).toBe(true);
    expect(await runRaw([tool!], 'hello', {}, optedIn)).toBe('hi');
  });
});
