import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { shellSandboxStatus } from '#src/tools/sandbox.ts';
import { createCustomToolProvider } from '#src/tools/custom/provider.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { createCustomToolCommands } from '../../tools/shell-exec.ts';
import { makeToolContext } from '../support/persona.ts';
import { callTool, makeScratch, recordingLog, stringParams, writeTool, type Scratch } from '../fixtures/custom-tools/tools.ts';

const sandboxed = shellSandboxStatus().available;
const reservedNames = createBuiltinTools({ timezone: 'UTC' }).map((tool) => tool.name);

let scratch: Scratch;
let recorded: ReturnType<typeof recordingLog>;
let provider: ReturnType<typeof createCustomToolProvider>;

beforeEach(() => {
  scratch = makeScratch({ tools: { shell: sandboxed ? 'sandboxed' : 'unsandboxed' } });
  recorded = recordingLog();
  provider = createCustomToolProvider({ sharedDir: scratch.sharedDir, reservedNames, commands: createCustomToolCommands(), log: recorded.log });
});
afterEach(() => scratch.remove());

const names = async () => (await provider.tools(scratch.persona)).map((tool) => tool.name).sort();
const call = async (name: string, args: unknown) => callTool(await provider.tools(scratch.persona), name, args, makeToolContext({ persona: scratch.persona }));

const echoTool = (name: string, text: string) => ({ name, description: `Says ${text}.`, parameters: { type: 'object', properties: {} }, command: `echo ${text}` });

describe('custom tools: loading', () => {
  it('loads a template tool and an executable from the persona folder and the shared folder, as custom search-tier tools', async () => {
    writeTool(scratch.own, 'greet', { name: 'greet', description: 'Greets someone.\nSecond line.', parameters: stringParams('who'), command: 'echo hello {{who}}', timeout: 5, contexts: ['user', 'cron'] });
    writeTool(scratch.sharedDir, 'count', { name: 'count_words', description: 'Counts words.', parameters: stringParams('text'), run: './run.sh' }, { 'run.sh': '#!/bin/sh\ntr -s " " "\\n" | wc -l\n' });
    const tools = await provider.tools(scratch.persona);
    expect(tools.map((t) => t.name).sort()).toEqual(['count_words', 'greet']);
    const greet = tools.find((t) => t.name === 'greet')!;
    expect(greet).toMatchObject({ group: 'custom', tier: 'search', description: 'Greets someone.\nSecond line.', contexts: ['user', 'cron'], parameters: stringParams('who') });
    expect(greet.approval?.byDefault).toBe(false);
    // The runner's outer limit leaves room for the tool's own timeout to fire and report.
    expect(greet.timeoutMs).toBeGreaterThan(5_000);
    expect(tools.find((t) => t.name === 'count_words')!.contexts).toBeUndefined();
    expect(await call('greet', { who: 'Ana' })).toBe('hello Ana');
    expect(await provider.problems(scratch.persona)).toEqual([]);
  });

  it('leaves out a tool.json whose parameters are not a valid JSON Schema, naming the file and the JSON path, logged once per change', async () => {
    writeTool(scratch.own, 'good', echoTool('good', 'ok'));
    const dns = writeTool(scratch.own, 'dns', {
      name: 'dns',
      description: 'Looks up a record.',
      parameters: { type: 'object', properties: { domain: { type: 'strin' } } },
      command: 'dig +short {{domain}}',
    });
    expect(await names()).toEqual(['good']);
    expect(await names()).toEqual(['good']);
    const file = path.join(dns, 'tool.json');
    expect(await provider.problems(scratch.persona)).toEqual([
      `${file}: /parameters/properties/domain/type must be one of "array", "boolean", "integer", "null", "number", "object", "string"`,
    ]);
    expect(recorded.warnings).toEqual([`custom tool left out: ${file}: /parameters/properties/domain/type must be one of "array", "boolean", "integer", "null", "number", "object", "string"`]);

    // Still wrong after an edit: said again, once.
    fs.writeFileSync(file, JSON.stringify({ name: 'dns', description: 'x', parameters: { type: 'object', properties: { domain: { type: 'string', minLength: -1 } } }, command: 'dig {{domain}}' }));
    await names();
    await names();
    expect(recorded.warnings).toHaveLength(2);
    expect(recorded.warnings[1]).toBe(`custom tool left out: ${file}: /parameters/properties/domain/minLength must be >= 0`);
  });

  it('says what is wrong with a tool.json: its shape, its JSON, its placeholders, its executable, its keywords', async () => {
    const cases: [string, unknown, string][] = [
      ['bad-name', { ...echoTool('DNS-Lookup', 'x') }, '/name must be snake_case (lowercase letters, digits and _), like "dns_lookup"'],
      ['no-description', { name: 'a', parameters: { type: 'object' }, command: 'true' }, '/: missing "description"'],
      ['unknown-key', { ...echoTool('b', 'x'), timout: 5 }, '/: unknown key "timout"'],
      ['long-timeout', { ...echoTool('c', 'x'), timeout: 601 }, '/timeout must be <= 600'],
      ['bad-context', { ...echoTool('d', 'x'), contexts: ['chat'] }, '/contexts/0 must be one of "user", "wake", "cron", "heartbeat", "subagent", "task", "persona"'],
      ['array-args', { ...echoTool('e', 'x'), parameters: { type: 'array' } }, '/parameters/type must be "object"'],
      ['both', { ...echoTool('f', 'x'), run: './run.sh' }, 'give exactly one of "command"'],
      ['neither', { name: 'g', description: 'g', parameters: { type: 'object' } }, 'give exactly one of "command"'],
      ['placeholder', { name: 'h', description: 'h', parameters: stringParams('domain'), command: 'dig {{domian}}' }, '/command: {{domian}} names no parameter (the parameters are domain); add it to /parameters/properties'],
      ['not-a-placeholder', { name: 'i', description: 'i', parameters: stringParams('domain'), command: 'dig {{ do-main }}' }, '/command: "{{ do-main }}" is not a placeholder'],
      ['single-quoted', { name: 'm', description: 'm', parameters: stringParams('who'), command: "echo 'hi {{who}}'" }, '/command: {{who}} is inside quotes; write it without them'],
      ['double-quoted', { name: 'n', description: 'n', parameters: stringParams('who'), command: 'echo "it\\"s {{who}}"' }, '/command: {{who}} is inside quotes; write it without them'],
      ['missing-run', { name: 'j', description: 'j', parameters: { type: 'object' }, run: './nothing.sh' }, '/run "./nothing.sh" does not exist in'],
      ['outside-run', { name: 'k', description: 'k', parameters: { type: 'object' }, run: '../../.env' }, '/run "../../.env" leads outside the tool\'s folder'],
      ['typo-keyword', { name: 'l', description: 'l', parameters: { type: 'object', requried: ['x'] }, command: 'true' }, '/parameters is not a schema that can be used (strict mode: unknown keyword: "requried")'],
      ['with-id', { name: 'm', description: 'm', parameters: { type: 'object', $id: 'urn:m' }, command: 'true' }, '/parameters/$id is not supported'],
      ['not-json', '{ "name": "n", ', 'not valid JSON'],
    ];
    for (const [folder, manifest] of cases) writeTool(scratch.own, folder, manifest as Record<string, unknown> | string);
    const plain = writeTool(scratch.own, 'not-executable', { name: 'o', description: 'o', parameters: { type: 'object' }, run: './run.sh' });
    fs.writeFileSync(path.join(plain, 'run.sh'), '#!/bin/sh\necho o\n');
    fs.mkdirSync(path.join(scratch.own, 'empty'));

    expect(await names()).toEqual([]);
    const problems = await provider.problems(scratch.persona);
    for (const [folder, , message] of cases) {
      expect(problems.find((p) => p.startsWith(`${path.join(scratch.own, folder, 'tool.json')}: `))).toContain(message);
    }
    expect(problems).toContain(`${path.join(plain, 'tool.json')}: /run "./run.sh" is not executable (chmod +x ${fs.realpathSync(path.join(plain, 'run.sh'))})`);
    expect(problems).toContain(`${path.join(scratch.own, 'empty')} has no tool.json; each folder in a tools folder is one tool`);
    expect(problems).toHaveLength(cases.length + 2);
  });

  it('refuses a name that is a built-in tool', async () => {
    const dir = writeTool(scratch.sharedDir, 'shell', echoTool('shell_exec', 'mine'));
    writeTool(scratch.own, 'clock', echoTool('clock', 'mine'));
    expect(await names()).toEqual([]);
    // The persona's own problems first.
    expect(await provider.problems(scratch.persona)).toEqual([
      `${path.join(scratch.own, 'clock', 'tool.json')}: /name "clock" is the name of a built-in tool; choose another`,
      `${path.join(dir, 'tool.json')}: /name "shell_exec" is the name of a built-in tool; choose another`,
    ]);
  });

  it('prefers the persona\'s own tool to a shared one of the same name, and keeps the other shared tools', async () => {
    writeTool(scratch.sharedDir, 'weather', echoTool('weather', 'shared'));
    writeTool(scratch.sharedDir, 'other', echoTool('other_tool', 'other'));
    writeTool(scratch.own, 'my-weather', echoTool('weather', 'own'));
    expect(await names()).toEqual(['other_tool', 'weather']);
    expect(await call('weather', {})).toBe('own');
    expect(await call('other_tool', {})).toBe('other');

    // Another persona has only the shared tools.
    const other = makeScratch({ name: 'bo', tools: scratch.persona.tools });
    try {
      const tools = await provider.tools(other.persona);
      expect(await callTool(tools, 'weather', {}, makeToolContext({ persona: other.persona }))).toBe('shared');
    } finally {
      other.remove();
    }
    expect(await provider.problems(scratch.persona)).toEqual([]);
  });

  it('uses the first of two folders in one tools folder that give the same name, and says so', async () => {
    writeTool(scratch.own, 'a-first', echoTool('twin', 'first'));
    writeTool(scratch.own, 'b-second', echoTool('twin', 'second'));
    expect(await call('twin', {})).toBe('first');
    expect(await provider.problems(scratch.persona)).toEqual([
      `${path.join(scratch.own, 'b-second', 'tool.json')}: /name "twin" is taken by ${path.join(scratch.own, 'a-first')} already; that one is used`,
    ]);
    await names();
    expect(recorded.warnings.filter((w) => w.includes('is taken by'))).toHaveLength(1);
  });

  it('says when the shared folder is missing, and has no tools without a persona tools folder', async () => {
    fs.rmSync(scratch.sharedDir, { recursive: true });
    fs.rmSync(scratch.own, { recursive: true });
    expect(await names()).toEqual([]);
    expect(await provider.problems(scratch.persona)).toEqual([`the shared tools folder ${scratch.sharedDir} (PARLOR_TOOLS_DIR) does not exist`]);
    const without = createCustomToolProvider({ reservedNames, commands: createCustomToolCommands(), log: recorded.log });
    expect(await without.tools(scratch.persona)).toEqual([]);
    expect(await without.problems(scratch.persona)).toEqual([]);
  });
});

describe('custom tools: hot reload', () => {
  it('takes up a folder added, changed or removed between calls, without a restart', async () => {
    expect(await names()).toEqual([]);
    const dir = writeTool(scratch.own, 'stamp', echoTool('stamp', 'one'));
    expect(await call('stamp', {})).toBe('one');

    const before = (await provider.tools(scratch.persona))[0];
    // Unchanged: the same Tool object (the runner's compiled validator is kept).
    expect((await provider.tools(scratch.persona))[0]).toBe(before);

    writeTool(scratch.own, 'stamp', { ...echoTool('stamp', 'two'), parameters: stringParams('x') });
    expect(await call('stamp', { x: 'y' })).toBe('two');
    expect(await call('stamp', {})).toMatch(/^invalid_arguments: \(arguments\): missing required property "x"/);

    // An executable tool: its script and its mode are watched too.
    writeTool(scratch.own, 'stamp', { name: 'stamp', description: 'd', parameters: { type: 'object' }, run: './run.sh' }, { 'run.sh': '#!/bin/sh\necho three\n' });
    expect(await call('stamp', {})).toBe('three');
    fs.chmodSync(path.join(dir, 'run.sh'), 0o644);
    expect(await names()).toEqual([]);
    fs.chmodSync(path.join(dir, 'run.sh'), 0o755);
    expect(await names()).toEqual(['stamp']);

    fs.rmSync(dir, { recursive: true });
    expect(await names()).toEqual([]);
    expect(recorded.infos).toEqual(expect.arrayContaining(['custom tool loaded', 'custom tool reloaded', 'custom tool removed']));
  });

  it('reads a folder again only when it changes', async () => {
    const dir = writeTool(scratch.own, 'quiet', echoTool('quiet', 'q'));
    await names();
    const loads = () => recorded.infos.filter((m) => m === 'custom tool loaded' || m === 'custom tool reloaded').length;
    expect(loads()).toBe(1);
    for (let i = 0; i < 5; i++) await names();
    expect(loads()).toBe(1);
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'a file beside tool.json');
    await names();
    expect(loads()).toBe(2);
  });
});
