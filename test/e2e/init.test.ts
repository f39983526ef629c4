// `parlor init` as a new user runs it: the real command in an empty folder, then the persona it wrote, talked to.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createBuiltinTools } from '../../tools/index.ts';
import { connectorsText, schedulesText, soulText, toolsText } from '../../src/cli/init-files.ts';
import { CONNECTOR_IDS, CONNECTORS as REGISTRY } from '../../connectors/registry.ts';
import type { TelegramSettings } from '../../connectors/telegram/entry.ts';
import type { DiscordSettings } from '../../connectors/discord/entry.ts';
import type { SlackSettings } from '../../connectors/slack/entry.ts';
import { parseEnvText, parseSettings } from '../../src/config/env.ts';
import { loadPersona, loadPersonas } from '../../src/config/persona.ts';
import { checkToolPolicies } from '../../src/tools/policy.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { until } from '../support/until.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');
const CONNECTORS = CONNECTOR_IDS;

let fake: FakeLlm;
let db: TestDatabase;
let cwd: string;
const folders: string[] = [];

beforeAll(async () => {
  fake = await startFakeLlm();
  db = await createTestDatabase();
});
afterAll(async () => {
  await fake?.close();
  await db?.drop();
  await Promise.all(folders.map((f) => fs.rm(f, { recursive: true, force: true })));
});
beforeEach(async () => {
  fake.reset();
  // A fresh folder each time, as a new user's: no .env, no personas.
  cwd = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-init-'));
  folders.push(cwd);
});

/** Runs `parlor` in `cwd` with a clean environment: only what the test gives it. */
function parlor(args: string[], env: Record<string, string> = {}, input?: string) {
  return execa('node', [bin, ...args], {
    cwd,
    env: { PATH: process.env.PATH!, HOME: cwd, ...env },
    extendEnv: false,
    input,
    reject: false,
    timeout: 60_000,
  });
}

/** Every file under `dir` with its content: what "untouched" is checked against. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    files[path.relative(dir, file)] = entry.isFile() ? await fs.readFile(file, 'utf8') : '(folder)';
  }
  return files;
}

const personasDir = () => path.join(cwd, 'personas');
const envSettings = async () => parseSettings(parseEnvText(await fs.readFile(path.join(cwd, '.env'), 'utf8')), cwd, REGISTRY);

describe('parlor init, scripted', () => {
  it('with flags, writes a persona that loadPersonas accepts and a .env that parseSettings accepts', async () => {
    const result = await parlor(['init', 'coder', '--soul', 'a terse Linux admin who helps me run my servers', '--base-url', fake.openaiBaseUrl, '--model', 'fake-model']);
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);

    const personas = loadPersonas(personasDir(), { connectors: CONNECTORS });
    expect(personas.map((p) => p.name)).toEqual(['coder']);
    const [coder] = personas;
    expect(coder.soul.split('\n')[0]).toBe('You are Coder, a terse Linux admin who helps me run my servers.');
    expect(coder.tools).toMatchObject({ approve: [], allow: [], deny: [] });
    expect(coder.users).toEqual([]);
    expect(coder.primary).toBeUndefined();
    expect(coder.schedules).toEqual([]);
    expect((await fs.stat(coder.workspace)).isDirectory()).toBe(true);
    // The tool policy is one start-up accepts, and shell_exec is left asking first.
    const tools = createBuiltinTools({ timezone: 'UTC' });
    expect(() => checkToolPolicies(personas, tools.map((t) => t.name))).not.toThrow();
    expect(await fs.readFile(path.join(coder.dir, 'tools.jsonc'), 'utf8')).toMatch(/shell_exec, ask first/);

    const settings = await envSettings();
    expect(settings.llm).toMatchObject({ provider: 'openai', baseUrl: fake.openaiBaseUrl, model: 'fake-model' });
    expect(settings.connectors).toEqual({});
    expect((await fs.stat(path.join(cwd, '.env'))).mode & 0o777).toBe(0o600);

    expect(result.stdout).toContain(`Wrote ${path.join('personas', 'coder')}/`);
    expect(result.stdout).toContain('Wrote .env with the model (fake-model)');
    expect(result.stdout).toMatch(/^Next:\n {2}npx parlor chat --persona coder +talk to it in this terminal$/m);
    expect(result.stdout).not.toContain('No model is set');
  });

  it('piped, it asks nothing and never waits for input; with no model given, .env holds examples and init says how to set one', async () => {
    // stdin stays open and silent: a command that waited for it would time out.
    const child = execa('node', [bin, 'init'], { cwd, env: { PATH: process.env.PATH!, HOME: cwd }, extendEnv: false, stdin: 'pipe', reject: false, timeout: 30_000 });
    const result = await child;
    expect(result.timedOut).toBe(false);
    expect(result.exitCode).toBe(0);
    // No persona existed, so it is called assistant.
    expect(loadPersonas(personasDir(), { connectors: CONNECTORS }).map((p) => p.name)).toEqual(['assistant']);
    const env = await fs.readFile(path.join(cwd, '.env'), 'utf8');
    expect(env).toContain('# LLM_BASE_URL=http://localhost:11434/v1');
    expect(env).toContain('# LLM_PROVIDER=anthropic');
    expect(env).toContain('# TELEGRAM_BOT_TOKEN=');
    expect((await envSettings()).llm).toBeUndefined();
    expect(result.stdout).toContain('No model is set yet: in .env, remove the # in front of one of the examples');
    expect(result.stdout).toContain('npx parlor chat --persona assistant');
  });

  it('the Telegram values end up in connectors.jsonc as users ["telegram:<id>"] and primary, and the token in .env', async () => {
    const result = await parlor(['init', 'ops', '--telegram-token', '123456:AAF-test_token', '--telegram-user', '4242', '--yes']);
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
    const [ops] = loadPersonas(personasDir(), { connectors: CONNECTORS });
    expect(ops.users).toEqual(['telegram:4242']);
    expect(ops.approvers).toEqual(['telegram:4242']);
    expect(ops.primary).toEqual({ connector: 'telegram', to: '4242' });
    expect(((await envSettings()).connectors.telegram as TelegramSettings | undefined)?.token).toBe('123456:AAF-test_token');
    expect(result.stdout).toMatch(/^ {2}npm start +run it on Telegram, then message your bot$/m);
  });

  it('the Discord and Slack flags of the real command: both platforms in users, the first primary, their tokens in .env', async () => {
    const discordId = '123456789012345678';
    const result = await parlor([
      'init', 'ops', '--discord-token', 'MTIz.Gabc12.test-token_x', '--discord-user', discordId,
      '--slack-token', 'xoxb-1-test', '--slack-app-token', 'xapp-1-test', '--slack-user', 'U0123ABC', '--yes',
    ]);
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
    const [ops] = loadPersonas(personasDir(), { connectors: CONNECTORS });
    expect(ops.users).toEqual([`discord:${discordId}`, 'slack:U0123ABC']);
    expect(ops.primary).toEqual({ connector: 'discord', to: discordId });
    const settings = await envSettings();
    expect((settings.connectors.discord as DiscordSettings | undefined)?.token).toBe('MTIz.Gabc12.test-token_x');
    expect((settings.connectors.slack as SlackSettings | undefined)?.botToken).toBe('xoxb-1-test');
    const refused = await parlor(['init', 'dev', '--slack-user', 'nope']);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/--slack-user/);
  });

  it('the commented examples in the files it writes load too once uncommented', async () => {
    const uncomment = (text: string) => text.replace(/^(\s*)\/\/ (?=["{])/gm, '$1');
    for (const answers of [{ name: 'plain' }, { name: 'mine', owners: { telegram: '4242' } }]) {
      const dir = path.join(cwd, 'examples', answers.name);
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(path.join(dir, 'SOUL.md'), soulText(answers));
      const files = { 'connectors.jsonc': connectorsText(answers, REGISTRY), 'tools.jsonc': toolsText(answers), 'schedules.jsonc': schedulesText(answers, REGISTRY) };
      for (const [file, text] of Object.entries(files)) {
        expect(uncomment(text), file).not.toBe(text);
        await fs.writeFile(path.join(dir, file), uncomment(text));
      }
      const persona = loadPersona(dir, { connectors: CONNECTORS });
      expect(persona.isDefault).toBe(true);
      expect(persona.approvers).toEqual(['telegram:123456789']);
      expect(persona.channels).toEqual([{ connector: 'telegram', chat: '-1001234567890', mention: true }]);
      expect(persona.tools).toMatchObject({ approvalTimeoutSeconds: 300, thinking: false, model: 'gpt-4.1-mini' });
      expect(persona.schedules.map((s) => [s.name, s.type, s.deliver?.to])).toEqual([
        ['hourly-check', 'heartbeat', undefined],
        ['morning-briefing', 'cron', answers.owners?.telegram ?? '123456789'],
      ]);
      expect(persona.users).toEqual(answers.owners ? ['telegram:4242'] : ['telegram:123456789']);
    }
  });
});

describe('parlor init refuses', () => {
  it('an existing persona folder or .env, with one line and exit 2, and leaves everything untouched', async () => {
    await fs.mkdir(path.join(personasDir(), 'coder'), { recursive: true });
    await fs.writeFile(path.join(personasDir(), 'coder', 'SOUL.md'), 'You are my own coder.');
    const before = await snapshot(cwd);
    const folder = await parlor(['init', 'coder', '--base-url', fake.openaiBaseUrl, '--model', 'fake-model']);
    expect(folder.exitCode).toBe(2);
    expect(folder.stderr).toBe(`parlor: ${path.join('personas', 'coder')} already exists and parlor init never overwrites a persona; pick another name`);
    expect(await snapshot(cwd)).toEqual(before);

    const envText = `LLM_BASE_URL=${fake.openaiBaseUrl}\nLLM_MODEL=mine\n`;
    await fs.writeFile(path.join(cwd, '.env'), envText);
    const withEnv = await snapshot(cwd);
    const env = await parlor(['init', 'other', '--model', 'fake-model', '--base-url', 'http://127.0.0.1:9/v1']);
    expect(env.exitCode).toBe(2);
    expect(env.stderr).toBe('parlor: .env already exists and parlor init never changes it: put those settings in it yourself, or leave out --model, --base-url');
    expect(await snapshot(cwd)).toEqual(withEnv);

    // Without model options, a second persona is written beside the first and .env stays as it was.
    const second = await parlor(['init', 'other', '--soul', 'a second opinion']);
    expect(second.exitCode).toBe(0);
    expect(await fs.readFile(path.join(cwd, '.env'), 'utf8')).toBe(envText);
    expect(second.stdout).not.toContain('Wrote .env');
    expect(loadPersonas(personasDir(), { connectors: CONNECTORS }).map((p) => p.name).sort()).toEqual(['coder', 'other']);
  });

  it('a bad name with one line, exit 2, and writes nothing', async () => {
    for (const [name, line] of [
      ['My Bot', 'parlor: "My Bot" is not a persona name: use lowercase letters, digits, - and _ (e.g. "my-bot")'],
      ['../outside', 'parlor: "../outside" is not a persona name: use lowercase letters, digits, - and _ (e.g. "outside")'],
    ]) {
      const result = await parlor(['init', name, '--yes']);
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toBe(line);
      expect(await fs.readdir(cwd)).toEqual([]);
      expect(await fs.readdir(path.dirname(cwd))).not.toContain('outside');
    }
    // With personas already there, there is no default name to take: it says so instead of asking.
    await fs.mkdir(path.join(personasDir(), 'assistant'), { recursive: true });
    await fs.writeFile(path.join(personasDir(), 'assistant', 'SOUL.md'), 'You are the first.');
    const unnamed = await parlor(['init', '--yes']);
    expect(unnamed.exitCode).toBe(2);
    expect(unnamed.stderr).toBe('parlor: name the new persona: parlor init <name> (personas already has assistant)');
  });

  it('model options that would not start Parlor, naming the option', async () => {
    const cases: [string[], string][] = [
      [['--model', 'gpt-4.1-mini'], "parlor: --model gpt-4.1-mini without --base-url means OpenAI's own API, which needs --api-key; for a local server give --base-url, e.g. http://localhost:11434/v1"],
      [['--base-url', 'localhost:11434/v1', '--model', 'llama3.1'], 'parlor: --base-url localhost:11434/v1 is not a URL: it needs http:// or https:// in front, e.g. http://localhost:11434/v1'],
      [['--provider', 'anthropic', '--model', 'claude-sonnet-4-5'], 'parlor: --provider anthropic needs --api-key (an Anthropic key, sk-ant-...)'],
      [['--telegram-user', '@ana'], 'parlor: --telegram-user @ana is not a Telegram user id (digits, e.g. 123456789); the bot tells you yours when you message it'],
    ];
    for (const [args, line] of cases) {
      const result = await parlor(['init', 'coder', ...args]);
      expect(result.stderr, args.join(' ')).toBe(line);
      expect(result.exitCode).toBe(2);
      expect(await fs.readdir(cwd)).toEqual([]);
    }
  });
});

describe('the first hour', () => {
  it('init, then parlor chat --persona <name> answers with the model and the soul it wrote', async () => {
    const init = await parlor(['init', 'coder', '--soul', 'a terse Linux admin', '--base-url', fake.openaiBaseUrl, '--model', 'fake-model', '--telegram-user', '4242']);
    expect(init.exitCode).toBe(0);
    const command = /^ {2}(npx parlor chat --persona coder)\b/m.exec(init.stdout)?.[1];
    expect(command).toBe('npx parlor chat --persona coder');

    // Only the database comes from the test: the model is the one in the .env init wrote, the persona in ./personas.
    fake.script({ text: 'Hello. Coder here.' });
    const chat = await parlor(['chat', '--persona', 'coder'], { DATABASE_URL: db.url }, 'hello\n');
    expect(chat.stderr).toBe('');
    expect(chat.exitCode).toBe(0);
    expect(chat.stdout).toBe('Hello. Coder here.');
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].model).toBe('fake-model');
    expect(fake.requests[0].system).toContain('You are Coder, a terse Linux admin.');
    expect(fake.requests[0].lastUserText).toBe('hello');
  });
});

describe('parlor init at a terminal', () => {
  /** `parlor init` on a pseudo-terminal (from `script`): what a person at the keyboard sees and types. */
  function atTerminal() {
    const child = execa('script', ['-qfec', `exec node ${bin} init`, '/dev/null'], {
      cwd,
      env: { PATH: process.env.PATH!, HOME: cwd, TERM: 'xterm' },
      extendEnv: false,
      stdin: 'pipe',
      reject: false,
      timeout: 60_000,
    });
    let screen = '';
    child.stdout!.on('data', (chunk: Buffer) => (screen += chunk.toString()));
    const clean = () => screen.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, '');
    return {
      child,
      screen: clean,
      /** Waits for `prompt` to show (the count-th time), then types `keys`. */
      async answer(prompt: string, keys: string, count = 1) {
        await until(() => clean().split(prompt).length > count, `"${prompt}" on screen`, 20_000);
        child.stdin!.write(keys);
      },
    };
  }

  it('asks a few questions with defaults, suggests the model the endpoint serves, and writes the answers', async () => {
    const t = atTerminal();
    await t.answer('Persona name (lowercase letters, digits, - and _) [assistant]: ', 'Tutor Bot\r');
    await t.answer('is not a persona name', 'tutor\r');
    await t.answer('Who is tutor, in one line', 'a patient maths tutor\r');
    await t.answer('Model endpoint: an OpenAI-compatible URL, or "anthropic" [http://localhost:11434/v1]: ', `${fake.openaiBaseUrl}\r`);
    await t.answer('API key (blank if the server needs none): ', '\r');
    await t.answer('Model name (blank to set it in .env later) [fake-model]: ', '\r');
    await t.answer('Telegram bot token from @BotFather (blank to skip): ', '123456:AAF-token\r');
    await t.answer('Your Telegram user id', '4242\r');
    await t.answer('Discord bot token', '\r');
    await t.answer('Slack bot token', '\r');
    const result = await t.child;
    expect(result.exitCode).toBe(0);
    expect(t.screen()).toContain('it serves: fake-model');
    expect(t.screen()).toContain('"Tutor Bot" is not a persona name');

    const [tutor] = loadPersonas(personasDir(), { connectors: CONNECTORS });
    expect(tutor.name).toBe('tutor');
    expect(tutor.soul.split('\n')[0]).toBe('You are Tutor, a patient maths tutor.');
    expect(tutor.users).toEqual(['telegram:4242']);
    const settings = await envSettings();
    expect(settings.llm).toMatchObject({ provider: 'openai', baseUrl: fake.openaiBaseUrl, model: 'fake-model' });
    expect((settings.connectors.telegram as TelegramSettings | undefined)?.token).toBe('123456:AAF-token');
  });

  it('Ctrl-C during the questions stops it, and nothing is written', async () => {
    const t = atTerminal();
    await t.answer('Persona name', 'tutor\r');
    await t.answer('Who is tutor, in one line', '\x03');
    const result = await t.child;
    expect(result.exitCode).toBe(130);
    expect(t.screen()).toContain('Stopped; nothing was written.');
    expect(await fs.readdir(cwd)).toEqual([]);
  });
});
