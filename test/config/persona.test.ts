// Persona folders: every problem is a ConfigError naming the file (and the JSON path where there is one).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { checkPersonaConnectors, loadPersona, loadPersonas } from '#src/config/persona.ts';
import { ConfigError } from '#src/config/errors.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let root: string;
beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-personas-'));
});
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

/** Writes a persona folder under `root`; SOUL.md defaults to a one-liner, `null` leaves a file out. */
function persona(name: string, files: Record<string, string | null> = {}): string {
  const dir = path.join(root, name);
  const all: Record<string, string | null> = { 'SOUL.md': `You are ${name}.`, ...files };
  for (const [rel, text] of Object.entries(all)) {
    if (text === null) continue;
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).not.toContain('\n');
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('a valid persona', () => {
  it('loads every file (JSONC comments, trailing commas) and fills in defaults', () => {
    const dir = persona('helper', {
      'SOUL.md': '\n  You are Helper.\n\n',
      'HEARTBEAT.md': 'Check the inbox.\n',
      'connectors.jsonc': `{
        // who may talk
        "default": true,
        "users": ["telegram:123456789", "slack:U024BE7LH",], /* trailing comma */
        "primary": { "connector": "telegram", "to": "123456789" },
        "channels": [
          { "connector": "discord", "chat": "80351110224678912" },
          { "connector": "telegram", "chat": "-1001234567890", "thread": "7", "mention": false, },
        ],
      }`,
      'tools.jsonc': '{ "deny": ["shell"], "approve": ["send_message",], "thinking": true, "maxIterations": 12, }',
      'schedules.jsonc': `[
        // morning
        { "name": "morning", "type": "cron", "cron": "0 8 * * 1-5", "prompt": "Plan my day.", "deliver": { "connector": "telegram", "to": "123456789" } },
        { "name": "pulse", "type": "heartbeat", "cron": "*/30 * * * *", "prompt": "Anything to do?", "fresh": true, },
      ]`,
    });
    const p = loadPersona(dir);
    expect(p.name).toBe('helper');
    expect(p.dir).toBe(dir);
    expect(p.soul).toBe('You are Helper.');
    expect(p.heartbeat).toBe('Check the inbox.');
    expect(p.isDefault).toBe(true);
    expect(p.users).toEqual(['telegram:123456789', 'slack:U024BE7LH']);
    expect(p.approvers).toEqual(p.users);
    expect(p.primary).toEqual({ connector: 'telegram', to: '123456789' });
    expect(p.channels).toEqual([
      { connector: 'discord', chat: '80351110224678912', mention: true },
      { connector: 'telegram', chat: '-1001234567890', thread: '7', mention: false },
    ]);
    expect(p.tools).toMatchObject({ deny: ['shell'], approve: ['send_message'], thinking: true, maxIterations: 12 });
    expect(p.schedules.map((s) => [s.name, s.type, s.cron])).toEqual([['morning', 'cron', '0 8 * * 1-5'], ['pulse', 'heartbeat', '*/30 * * * *']]);
    expect(p.schedules[0].deliver).toEqual({ connector: 'telegram', to: '123456789' });
    expect(p.workspace).toBe(path.join(dir, 'workspace'));
    expect(p.secrets).toEqual({});
    expect(p.skills).toEqual([]);
  });

  it('with only a SOUL.md gets empty defaults', () => {
    const p = loadPersona(persona('bare'));
    expect(p).toMatchObject({
      isDefault: false, users: [], approvers: [], channels: [], schedules: [], heartbeat: undefined, primary: undefined,
      tools: { deny: [], approve: [], thinking: false },
    });
  });

  it('keeps explicit approvers', () => {
    const p = loadPersona(persona('p', { 'connectors.jsonc': '{ "users": ["telegram:1", "telegram:2"], "approvers": ["telegram:1"] }' }));
    expect(p.approvers).toEqual(['telegram:1']);
  });

  it('reads persona secrets from its .env', () => {
    const p = loadPersona(persona('p', { '.env': '# secrets\nGITHUB_TOKEN=ghp_abc\nQUOTED="a b c"\n' }));
    expect(p.secrets).toEqual({ GITHUB_TOKEN: 'ghp_abc', QUOTED: 'a b c' });
  });

  it('lists skills that have a SKILL.md', () => {
    const dir = persona('p', {
      'skills/weather/SKILL.md': '---\nname: weather\ndescription: Look up the forecast\n---\nUse the API.\n',
      'skills/notes/SKILL.md': '# Notes\nKeep tidy notes.\n',
      'skills/empty-folder/README.md': 'not a skill',
    });
    const skills = loadPersona(dir).skills.sort((a, b) => a.name.localeCompare(b.name));
    expect(skills).toEqual([
      { name: 'notes', description: '# Notes', file: path.join(dir, 'skills/notes/SKILL.md') },
      { name: 'weather', description: 'Look up the forecast', file: path.join(dir, 'skills/weather/SKILL.md') },
    ]);
  });

  it('treats a comment-only JSONC file like a missing one', () => {
    const p = loadPersona(persona('p', { 'schedules.jsonc': '// nothing scheduled yet\n', 'tools.jsonc': '' }));
    expect(p.schedules).toEqual([]);
    expect(p.tools.deny).toEqual([]);
  });
});

describe('SOUL.md', () => {
  it('missing', () => {
    const dir = persona('p', { 'SOUL.md': null });
    expect(configError(() => loadPersona(dir)).message).toContain(path.join(dir, 'SOUL.md'));
  });

  it('empty (whitespace only)', () => {
    const dir = persona('p', { 'SOUL.md': '  \n\n' });
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'SOUL.md'));
    expect(err.message).toMatch(/empty/);
  });
});

describe('JSONC files', () => {
  it('malformed JSONC reports file:line:column', () => {
    const dir = persona('p', { 'connectors.jsonc': '{\n  "default": true\n  "users": []\n}\n' });
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(`${path.join(dir, 'connectors.jsonc')}:3:3:`);
    expect(err.message).toMatch(/invalid JSONC/);
  });

  it('an unknown key names the file, the JSON path and the key', () => {
    const dir = persona('p', { 'connectors.jsonc': '{ "channels": [{ "connector": "telegram", "chat": "1", "mentions": true }] }' });
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'connectors.jsonc'));
    expect(err.message).toContain('/channels/0');
    expect(err.message).toContain('"mentions"');
  });

  it('an unknown top-level key in tools.jsonc', () => {
    const dir = persona('p', { 'tools.jsonc': '{ "denied": ["shell"] }' });
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'tools.jsonc'));
    expect(err.message).toContain('"denied"');
  });

  it('a wrong type names the path', () => {
    const dir = persona('p', { 'connectors.jsonc': '{ "channels": [{ "connector": "telegram", "chat": "1", "mention": "yes" }] }' });
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'connectors.jsonc'));
    expect(err.message).toContain('/channels/0/mention');
    expect(err.message).toMatch(/boolean/);
  });

  it('an out-of-range number in tools.jsonc names the path', () => {
    const err = configError(() => loadPersona(persona('p', { 'tools.jsonc': '{ "maxIterations": 0 }' })));
    expect(err.message).toContain('/maxIterations');
  });

  it.each(['123456789', 'Telegram:1', 'telegram:', ':1'])('a bad user address %j', (address) => {
    const dir = persona('p', { 'connectors.jsonc': JSON.stringify({ users: ['telegram:1', address] }) });
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'connectors.jsonc'));
    expect(err.message).toContain('/users/1');
    expect(err.message).toContain('must look like "<connector>:<user id>"');
  });

  it('a bad approver address', () => {
    const err = configError(() => loadPersona(persona('p', { 'connectors.jsonc': '{ "approvers": ["bob"] }' })));
    expect(err.message).toContain('/approvers/0');
  });

  it('a schedule without a prompt', () => {
    const err = configError(() => loadPersona(persona('p', { 'schedules.jsonc': '[{ "name": "a", "type": "cron", "cron": "* * * * *" }]' })));
    expect(err.message).toContain('schedules.jsonc');
    expect(err.message).toContain('prompt');
  });
});

describe('schedules', () => {
  const entry = (name: string, cron: string) => ({ name, type: 'cron', cron, prompt: 'go' });
  const schedules = (...entries: object[]) => ({ 'schedules.jsonc': JSON.stringify(entries) });

  it('a duplicate name', () => {
    const dir = persona('p', schedules(entry('daily', '0 9 * * *'), entry('daily', '0 18 * * *')));
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'schedules.jsonc'));
    expect(err.message).toContain('/1/name');
    expect(err.message).toContain('"daily"');
  });

  it.each([
    ['4 fields', '0 9 * *'],
    ['6 fields', '0 0 9 * * *'],
    ['a bad field', '0 9 * * x?'],
    ['a word in a field', '0 nine * * *'],
  ])('an invalid cron (%s)', (_what, cron) => {
    const dir = persona('p', schedules(entry('daily', cron)));
    const err = configError(() => loadPersona(dir));
    expect(err.message).toContain(path.join(dir, 'schedules.jsonc'));
    expect(err.message).toContain('/0/cron');
    expect(err.message).toContain(cron);
  });

  it('the field count is in the message', () => {
    const err = configError(() => loadPersona(persona('p', schedules(entry('daily', '0 9 * *')))));
    expect(err.message).toMatch(/4 fields/);
  });

  // The scheduler (pg-boss, via cron-parser) rejects these; the load-time check should too.
  it.each(['60 9 * * *', '0 24 * * *', 'abc * * * *'])('an out-of-range cron %j is rejected', (cron) => {
    const err = configError(() => loadPersona(persona('p', schedules(entry('daily', cron)))));
    expect(err.message).toContain('/0/cron');
  });

  it.each(['0 8 * * 1-5', '*/15 * * * *', '0 9,18 * * MON-FRI', '5 4 1 JAN *', '0 0 1-7/2 * 0'])('a valid cron %j loads', (cron) => {
    expect(loadPersona(persona('p', schedules(entry('x', cron)))).schedules[0].cron).toBe(cron);
  });
});

describe('files that are not files', () => {
  const FILES = ['SOUL.md', 'connectors.jsonc', 'tools.jsonc', 'schedules.jsonc', 'HEARTBEAT.md', '.env'];

  it.each(FILES)('a %s that is a directory is a one-line error naming it, not a stack trace', (file) => {
    const dir = persona('p', { [file]: null });
    fs.mkdirSync(path.join(dir, file));
    const err = configError(() => loadPersonas(root));
    expect(err.message).toBe(`${path.join(dir, file)} is a directory; it must be a file`);
  });

  it.each(FILES)('a %s that is a symlink to nothing is an error, not a missing file', (file) => {
    const dir = persona('p', { [file]: null });
    const target = path.join(root, 'gone', file);
    fs.symlinkSync(target, path.join(dir, file));
    const err = configError(() => loadPersonas(root));
    expect(err.message).toBe(`${path.join(dir, file)} is a symlink to ${target}, which does not exist; point it at a file or remove it`);
  });

  it('a symlink loop is an error naming the file', () => {
    const dir = persona('p');
    fs.symlinkSync(path.join(dir, 'tools.jsonc'), path.join(dir, 'tools.jsonc'));
    const err = configError(() => loadPersona(dir));
    expect(err.message.startsWith(`${path.join(dir, 'tools.jsonc')} cannot be read (ELOOP`)).toBe(true);
  });

  it('a symlink to a real file is read through', () => {
    const dir = persona('p');
    fs.writeFileSync(path.join(root, 'shared-tools.jsonc'), '{ "thinking": true }');
    fs.writeFileSync(path.join(root, 'shared-soul.md'), 'You are shared.');
    fs.rmSync(path.join(dir, 'SOUL.md'));
    fs.symlinkSync(path.join(root, 'shared-tools.jsonc'), path.join(dir, 'tools.jsonc'));
    fs.symlinkSync(path.join(root, 'shared-soul.md'), path.join(dir, 'SOUL.md'));
    const p = loadPersona(dir);
    expect(p.tools.thinking).toBe(true);
    expect(p.soul).toBe('You are shared.');
  });

  it('a skills/<name>/SKILL.md that is a directory, and a skills that is a file', () => {
    const dir = persona('p');
    fs.mkdirSync(path.join(dir, 'skills', 'weather', 'SKILL.md'), { recursive: true });
    expect(configError(() => loadPersona(dir)).message).toBe(`${path.join(dir, 'skills', 'weather', 'SKILL.md')} is a directory; it must be a file`);
    fs.rmSync(path.join(dir, 'skills'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'skills'), 'oops');
    expect(configError(() => loadPersona(dir)).message).toBe(`${path.join(dir, 'skills')} is a file; it must be a folder with one folder per skill`);
  });

  it('a persona folder that is a symlink loads; one that leads nowhere is an error', () => {
    const real = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-linked-'));
    try {
      fs.writeFileSync(path.join(real, 'SOUL.md'), 'You are linked.');
      fs.symlinkSync(real, path.join(root, 'linked'));
      expect(loadPersonas(root).map((p) => [p.name, p.soul])).toEqual([['linked', 'You are linked.']]);
      fs.symlinkSync(path.join(root, 'nowhere'), path.join(root, 'dangling'));
      expect(configError(() => loadPersonas(root)).message).toBe(`persona folder ${path.join(root, 'dangling')} is a symlink to ${path.join(root, 'nowhere')}, which does not exist`);
    } finally {
      fs.rmSync(real, { recursive: true, force: true });
    }
  });

  it('a personas folder that is a file', () => {
    const file = path.join(root, 'personas.txt');
    fs.writeFileSync(file, '');
    expect(configError(() => loadPersonas(file)).message).toBe(`personas folder ${file} is a file; it must be a folder with one folder per persona`);
  });
});

describe('connector names', () => {
  const KNOWN = ['telegram', 'discord', 'slack', 'terminal'];
  const HINT = '(known: discord, slack, telegram, terminal; did you mean "telegram"?)';

  it.each([
    ['users', { users: ['telegram:1', 'telegrm:123'] }, `/users/1 "telegrm:123" names no connector "telegrm" ${HINT}`],
    ['approvers', { users: ['telegram:1'], approvers: ['telegrm:123'] }, `/approvers/0 "telegrm:123" names no connector "telegrm" ${HINT}`],
    ['primary', { primary: { connector: 'telegrm', to: '1' } }, `/primary/connector "telegrm" is no connector ${HINT}`],
    ['channels', { channels: [{ connector: 'slack', chat: 'C1' }, { connector: 'telegrm', chat: '-100' }] }, `/channels/1/connector "telegrm" is no connector ${HINT}`],
  ])('an unknown connector in %s names the file, the JSON path and the nearest known one', (_field, connectors, problem) => {
    const dir = persona('p', { 'connectors.jsonc': JSON.stringify(connectors) });
    const err = configError(() => loadPersonas(root, { connectors: KNOWN }));
    expect(err.message).toBe(`${path.join(dir, 'connectors.jsonc')}: ${problem}`);
  });

  it("in a schedule's deliver", () => {
    const dir = persona('p', { 'schedules.jsonc': JSON.stringify([{ name: 'a', type: 'cron', cron: '0 9 * * *', prompt: 'p', deliver: { connector: 'telegrm', to: '1' } }]) });
    const err = configError(() => loadPersona(dir, { connectors: KNOWN }));
    expect(err.message).toBe(`${path.join(dir, 'schedules.jsonc')}: /0/deliver/connector "telegrm" is no connector ${HINT}`);
  });

  it('a name far from every known one gets no suggestion', () => {
    const dir = persona('p', { 'connectors.jsonc': JSON.stringify({ users: ['matrix:@ana:example.org'] }) });
    const err = configError(() => loadPersona(dir, { connectors: KNOWN }));
    expect(err.message).toBe(`${path.join(dir, 'connectors.jsonc')}: /users/0 "matrix:@ana:example.org" names no connector "matrix" (known: discord, slack, telegram, terminal)`);
  });

  it('the same check on a loaded persona, for callers that learn the connector ids later', () => {
    const dir = persona('p', { 'connectors.jsonc': JSON.stringify({ users: ['chat:u1'], channels: [{ connector: 'chta', chat: 'g1' }] }) });
    const loaded = loadPersona(dir);
    checkPersonaConnectors(loadPersona(persona('q', { 'connectors.jsonc': JSON.stringify({ users: ['chat:u1'] }) })), [...KNOWN, 'chat']);
    const err = configError(() => checkPersonaConnectors(loaded, [...KNOWN, 'chat']));
    expect(err.message).toBe(
      `${path.join(dir, 'connectors.jsonc')}: /channels/0/connector "chta" is no connector (known: chat, discord, slack, telegram, terminal; did you mean "chat"?)`,
    );
  });

  it('known names load, and without the list nothing is checked', () => {
    const connectors = {
      users: ['telegram:1', 'discord:2'],
      approvers: ['slack:U1'],
      primary: { connector: 'telegram', to: '1' },
      channels: [{ connector: 'slack', chat: 'C1' }],
    };
    persona('p', { 'connectors.jsonc': JSON.stringify(connectors) });
    expect(loadPersonas(root, { connectors: KNOWN })[0].users).toEqual(['telegram:1', 'discord:2']);
    persona('q', { 'connectors.jsonc': JSON.stringify({ users: ['telegrm:1'] }) });
    expect(loadPersonas(root).map((p) => p.name).sort()).toEqual(['p', 'q']);
  });
});

describe('loadPersonas', () => {
  it('loads every folder, skipping dot-folders and files', () => {
    persona('alpha', { 'connectors.jsonc': '{ "default": true }' });
    persona('beta');
    fs.mkdirSync(path.join(root, '.git'));
    fs.writeFileSync(path.join(root, 'README.md'), 'personas');
    const list = loadPersonas(root);
    expect(list.map((p) => p.name).sort()).toEqual(['alpha', 'beta']);
    expect(list.find((p) => p.isDefault)?.name).toBe('alpha');
  });

  it('two default personas', () => {
    persona('alpha', { 'connectors.jsonc': '{ "default": true }' });
    persona('beta', { 'connectors.jsonc': '{ "default": true }' });
    const err = configError(() => loadPersonas(root));
    expect(err.message).toContain('alpha');
    expect(err.message).toContain('beta');
    expect(err.message).toContain('default');
  });

  it('no personas', () => {
    expect(configError(() => loadPersonas(root)).message).toContain(root);
  });

  it('a missing personas folder', () => {
    const missing = path.join(root, 'nope');
    const err = configError(() => loadPersonas(missing));
    expect(err.message).toContain(missing);
    expect(err.message).toContain('PARLOR_PERSONAS_DIR');
  });

  it.each(['My Persona', 'Alpha', '-dash', 'caf\u00e9'])('a folder with an invalid name %j', (name) => {
    persona(name);
    const err = configError(() => loadPersonas(root));
    expect(err.message).toContain(`"${name}"`);
  });

  it('a broken persona fails the whole load and names its file', () => {
    persona('good');
    persona('bad', { 'tools.jsonc': '{ "thinking": "yes" }' });
    const err = configError(() => loadPersonas(root));
    expect(err.message).toContain(path.join(root, 'bad', 'tools.jsonc'));
    expect(err.message).toContain('/thinking');
  });
});

describe('the shipped personas folder', () => {
  it('loads without error and has "assistant" as the default', () => {
    const list = loadPersonas(path.join(REPO, 'personas'));
    const assistant = list.find((p) => p.name === 'assistant');
    expect(assistant).toBeDefined();
    expect(assistant?.isDefault).toBe(true);
    expect(list.filter((p) => p.isDefault)).toHaveLength(1);
    expect(assistant?.soul.length).toBeGreaterThan(50);
  });
});
