// `parlor init` driven by the connector registry: each platform's flags, questions, checks and the files they
// write. The command itself is run by init(), with a folder of its own and scripted input; test/e2e/init.test.ts
// runs the real process.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { CONNECTOR_IDS, CONNECTORS } from '#connectors/registry.ts';
import type { DiscordSettings } from '#connectors/discord/entry.ts';
import type { SlackSettings } from '#connectors/slack/entry.ts';
import { init, type InitValues } from '#src/cli/init.ts';
import { initOptions, initOptionsHelp, type ConnectorInit, type InitConnectorEntry } from '#src/cli/init-connector.ts';
import { connectorsText, envText, schedulesText, soulText, toolsText } from '#src/cli/init-files.ts';
import { parseEnvText, parseSettings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { loadPersona } from '#src/config/persona.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
let cwd: string;

beforeEach(() => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-init-unit-'));
  folders.push(cwd);
});
afterAll(() => folders.forEach((f) => fs.rmSync(f, { recursive: true, force: true })));

/** init() in `cwd`, with `env` as the environment it reads and `answers` typed at a terminal when given. */
async function run(values: InitValues, options: { env?: Record<string, string>; answers?: string[]; connectors?: readonly InitConnectorEntry[] } = {}) {
  const connectors = options.connectors ?? CONNECTORS;
  const settings = parseSettings(options.env ?? {}, cwd, connectors);
  const input = new PassThrough();
  // Typed ahead, then the end of input: a question nobody expected ends it with "Stopped" instead of waiting.
  if (options.answers) input.end(options.answers.map((a) => `${a}\n`).join(''));
  let output = '';
  const out = new Writable({
    write(chunk, _encoding, done) {
      output += String(chunk);
      done();
    },
  });
  const code = await init(settings, values, { cwd, input, output: out, interactive: Boolean(options.answers) }, connectors);
  return { code, output };
}

/** The one-line ConfigError init refuses with; the folder is left as it was. */
async function refusal(values: InitValues): Promise<string> {
  const before = fs.readdirSync(cwd, { recursive: true });
  const err = await run(values).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, JSON.stringify(values)).toBeInstanceOf(ConfigError);
  expect(fs.readdirSync(cwd, { recursive: true })).toEqual(before);
  return (err as ConfigError).message;
}

const persona = (name: string) => loadPersona(path.join(cwd, 'personas', name), { connectors: CONNECTOR_IDS });
const envSettings = () => parseSettings(parseEnvText(fs.readFileSync(path.join(cwd, '.env'), 'utf8')), cwd, CONNECTORS);
const envFile = () => fs.readFileSync(path.join(cwd, '.env'), 'utf8');

describe('parlor init with flags, for each platform', () => {
  it('Discord: --discord-token goes to .env, --discord-user becomes users and primary', async () => {
    const { code, output } = await run({ name: 'ops', 'discord-token': 'MTAx.Gx1.abc-DEF_9', 'discord-user': '80351110224678912' });
    expect(code).toBe(0);
    const ops = persona('ops');
    expect(ops.users).toEqual(['discord:80351110224678912']);
    expect(ops.primary).toEqual({ connector: 'discord', to: '80351110224678912' });
    expect((envSettings().connectors.discord as DiscordSettings).token).toBe('MTAx.Gx1.abc-DEF_9');
    expect(envSettings().connectors.telegram).toBeUndefined();
    expect(envFile()).toContain('# TELEGRAM_BOT_TOKEN=123456789:AA...');
    expect(envFile()).toContain('# DISCORD_MESSAGE_CONTENT=true');
    expect(output).toContain('  connectors.jsonc   who may talk to it (discord:80351110224678912, also its primary), and where it lives');
    expect(output).toContain('Wrote .env with model examples to fill in and the Discord bot token');
    expect(output).toMatch(/^ {2}npm start +run it on Discord, then message your bot$/m);
    expect(output).not.toContain('strangers');
  });

  it('Slack in Socket Mode: the bot and app tokens go to .env, the signing secret stays an example', async () => {
    const { code, output } = await run({ name: 'ops', 'slack-token': 'xoxb-1-2-abc', 'slack-app-token': 'xapp-1-A1-xyz', 'slack-user': 'U024BE7LH' });
    expect(code).toBe(0);
    expect(persona('ops').users).toEqual(['slack:U024BE7LH']);
    expect(persona('ops').primary).toEqual({ connector: 'slack', to: 'U024BE7LH' });
    expect(envSettings().connectors.slack).toEqual({ botToken: 'xoxb-1-2-abc', appToken: 'xapp-1-A1-xyz', signingSecret: undefined, apiUrl: undefined });
    expect(envFile()).toMatch(/^# SLACK_SIGNING_SECRET=\.\.\.$/m);
    expect(output).toContain('Wrote .env with model examples to fill in, the Slack bot token and the Slack app token');
    expect(output).toMatch(/^ {2}npm start +run it on Slack, then message your bot$/m);
  });

  it('Slack with HTTP events: the signing secret instead of the app token', async () => {
    const secret = '8f742231b10e8888abcd99aa0ddd85a5';
    expect((await run({ name: 'ops', 'slack-token': 'xoxb-1', 'slack-signing-secret': secret })).code).toBe(0);
    expect((envSettings().connectors.slack as SlackSettings).signingSecret).toBe(secret);
    expect(envFile()).toMatch(/^# SLACK_APP_TOKEN=xapp-\.\.\.$/m);
    // No member id given: the example line is there to fill in, and init says so.
    expect(fs.readFileSync(path.join(cwd, 'personas', 'ops', 'connectors.jsonc'), 'utf8')).toContain('    // "slack:U024BE7LH",\n');
    expect(persona('ops').users).toEqual([]);
  });

  it('the address the bot names to strangers is taken as the id it holds', async () => {
    expect((await run({ name: 'ops', 'slack-user': 'slack:U024BE7LH', 'telegram-user': 'Telegram:4242' })).code).toBe(0);
    expect(persona('ops').users).toEqual(['telegram:4242', 'slack:U024BE7LH']);
  });

  it('several platforms: one primary (the first in the registry), every owner a user, and a hint for each', async () => {
    const { output } = await run({ name: 'ops', 'telegram-token': '123456:AAF-x', 'discord-user': '80351110224678912', 'slack-token': 'xoxb-1', 'slack-app-token': 'xapp-1' });
    const ops = persona('ops');
    expect(ops.users).toEqual(['discord:80351110224678912']);
    expect(ops.primary).toEqual({ connector: 'discord', to: '80351110224678912' });
    expect(output).toMatch(/^ {2}npm start +run it on Telegram and Slack$/m);
    expect(output).toContain('Your bot answers strangers with their address: add yours to "users" in personas/ops/connectors.jsonc.');
    expect(output).toContain('To reach it on Discord, set DISCORD_BOT_TOKEN in .env (a bot token from the Developer Portal: your application → Bot → Reset Token) and run npm start.');
    // The platforms being set up without an owner get an example line to fill in.
    const text = fs.readFileSync(path.join(cwd, 'personas', 'ops', 'connectors.jsonc'), 'utf8');
    expect(text).toContain('  "users": [\n    // "telegram:123456789",\n    "discord:80351110224678912",\n    // "slack:U024BE7LH",\n  ],');

    fs.rmSync(path.join(cwd, '.env'));
    const mixed = await run({ name: 'two', 'telegram-token': '123456:AAF-x', 'telegram-user': '4242', 'slack-token': 'xoxb-1', 'slack-app-token': 'xapp-1' });
    expect(mixed.output).toMatch(/^ {2}npm start +run it on Telegram and Slack, then message your bot$/m);
    expect(mixed.output).toContain('On Slack, your bot answers strangers with their address: add yours to "users" in personas/two/connectors.jsonc.');
  });

  it('a platform set in the environment already counts as set up', async () => {
    const { output } = await run({ name: 'ops', 'discord-user': '80351110224678912' }, { env: { DISCORD_BOT_TOKEN: 'a.b.c' } });
    expect(output).toMatch(/^ {2}npm start +run it on Discord, then message your bot$/m);
    expect(output).not.toContain('To reach it');
  });
});

describe('parlor init refuses, naming the flag, and writes nothing', () => {
  it.each<[InitValues, string]>([
    [{ 'discord-user': '@ana' }, '--discord-user @ana is not a Discord user id (17 to 20 digits, e.g. 80351110224678912); turn on Developer Mode (User Settings → Advanced), then right-click your name → Copy User ID'],
    [{ 'discord-user': '1234' }, '--discord-user 1234 is not a Discord user id (17 to 20 digits, e.g. 80351110224678912); turn on Developer Mode (User Settings → Advanced), then right-click your name → Copy User ID'],
    [{ 'slack-user': 'ana' }, '--slack-user ana is not a Slack member id (U or W, then capital letters and digits, e.g. U024BE7LH); in Slack open your profile → ⋮ → Copy member ID'],
    [{ 'slack-user': 'C0123ABCD' }, '--slack-user C0123ABCD is not a Slack member id (U or W, then capital letters and digits, e.g. U024BE7LH); in Slack open your profile → ⋮ → Copy member ID'],
    [{ 'telegram-user': 'slack:U024BE7LH' }, '--telegram-user slack:U024BE7LH is not a Telegram user id (digits, e.g. 123456789); the bot tells you yours when you message it'],
    [{ 'discord-token': 'not-a-token' }, '--discord-token: that does not look like a bot token (three parts joined by dots); copy it from the Developer Portal: your application → Bot → Reset Token'],
    [{ 'slack-token': 'xoxp-user-token', 'slack-app-token': 'xapp-1' }, "--slack-token: that is not a bot token; Slack's is the Bot User OAuth Token (xoxb-…, under OAuth & Permissions in the app settings)"],
    [{ 'slack-token': 'xoxb-1' }, '--slack-token needs --slack-app-token (Socket Mode) or --slack-signing-secret (HTTP events)'],
    [{ 'slack-app-token': 'xapp-1' }, '--slack-app-token needs --slack-token too (the Slack bot token)'],
    [{ 'slack-token': 'xoxb-1', 'slack-app-token': 'xoxb-2' }, '--slack-app-token: that is not an app-level token; Socket Mode needs an app-level token (xapp-…, Basic Information → App-Level Tokens, with connections:write)'],
    [{ 'slack-token': 'xoxb-1', 'slack-signing-secret': 'xapp-1-abc' }, '--slack-signing-secret: that is a token, not the signing secret; copy the Signing Secret from Basic Information → App Credentials'],
    [{ 'slack-token': 'xoxb-1', 'slack-signing-secret': 'short' }, '--slack-signing-secret: that does not look like a signing secret (one word of letters and digits); copy it from Basic Information → App Credentials'],
  ])('%j', async (values, message) => {
    expect(await refusal({ name: 'ops', ...values })).toBe(message);
  });

  it('a secret is never repeated in the message', async () => {
    expect(await refusal({ name: 'ops', 'discord-token': 'secret value' })).not.toContain('secret value');
  });

  it("a platform's token when .env is there already", async () => {
    fs.writeFileSync(path.join(cwd, '.env'), 'LLM_MODEL=x\nLLM_BASE_URL=http://127.0.0.1:9/v1\n');
    expect(await refusal({ name: 'ops', 'slack-token': 'xoxb-1', 'slack-app-token': 'xapp-1', 'slack-user': 'U024BE7LH' })).toBe(
      '.env already exists and parlor init never changes it: put those settings in it yourself, or leave out --slack-token, --slack-app-token',
    );
    // An owner's id goes into the persona, not .env: that is fine.
    expect((await run({ name: 'ops', 'slack-user': 'U024BE7LH' })).code).toBe(0);
    expect(fs.readFileSync(path.join(cwd, '.env'), 'utf8')).toBe('LLM_MODEL=x\nLLM_BASE_URL=http://127.0.0.1:9/v1\n');
  });
});

describe('parlor init at a terminal, for each platform', () => {
  const llm = { LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'm' };

  it('asks each platform in turn, re-asks a bad answer with what is wrong, and writes the answers', async () => {
    const { code, output } = await run(
      {},
      {
        env: llm,
        answers: [
          'ops',
          '',
          '', // no Telegram
          'nope', // a Discord token that is not one
          'MTAx.Gx1.abc',
          '@ana', // not a Discord user id
          'discord:80351110224678912',
          'xoxb-1',
          '', // no app token…
          '', // …and no signing secret: Slack needs one of them
          '',
          '8f742231b10e8888abcd99aa0ddd85a5',
          'u024be7lh', // lower case is not a member id
          'U024BE7LH',
        ],
      },
    );
    expect(output).not.toContain('Stopped');
    expect(code).toBe(0);
    expect(output).not.toContain('Your Telegram user id');
    expect(output).toContain('Discord bot token from the Developer Portal, your application → Bot → Reset Token (blank to skip): ');
    expect(output).toContain('  that does not look like a bot token (three parts joined by dots)');
    expect(output).toContain('  @ana is not a Discord user id (17 to 20 digits, e.g. 80351110224678912)');
    expect(output).toContain('  Slack needs the Slack app token (Socket Mode) or the Slack signing secret (HTTP events); give one of them, or press Ctrl-C to stop');
    expect(output.split('Slack app-level token for Socket Mode').length - 1).toBe(2);
    expect(output).toContain('  u024be7lh is not a Slack member id');
    expect(output).not.toContain('MTAx.Gx1.abc');

    const ops = persona('ops');
    expect(ops.users).toEqual(['discord:80351110224678912', 'slack:U024BE7LH']);
    expect(ops.primary).toEqual({ connector: 'discord', to: '80351110224678912' });
    const settings = envSettings();
    expect(settings.connectors.telegram).toBeUndefined();
    expect((settings.connectors.discord as DiscordSettings).token).toBe('MTAx.Gx1.abc');
    expect(settings.connectors.slack).toMatchObject({ botToken: 'xoxb-1', appToken: undefined, signingSecret: '8f742231b10e8888abcd99aa0ddd85a5' });
    expect(output).toMatch(/^ {2}npm start +run it on Discord and Slack, then message your bot$/m);
  });

  it('with .env there, asks only for your id on the platforms it configures', async () => {
    fs.writeFileSync(path.join(cwd, '.env'), 'SLACK_BOT_TOKEN=xoxb-1\n');
    const { code, output } = await run({}, { env: { ...llm, SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1' }, answers: ['ops', '', 'U024BE7LH'] });
    expect(code).toBe(0);
    expect(output).not.toMatch(/bot token/);
    expect(output).toContain('Your Slack member id');
    expect(persona('ops').users).toEqual(['slack:U024BE7LH']);
  });

  it('input that ends in the middle of a platform writes nothing', async () => {
    const { code, output } = await run({}, { env: llm, answers: ['ops', '', '', '', 'xoxb-1'] });
    expect(code).toBe(130);
    expect(output).toContain('Stopped; nothing was written.');
    expect(fs.readdirSync(cwd)).toEqual([]);
  });
});

describe('the registry drives parlor init', () => {
  it('offers every entry with an init description: its flags and --help lines', () => {
    expect(Object.keys(initOptions(CONNECTORS))).toEqual([
      'telegram-token',
      'telegram-user',
      'discord-token',
      'discord-user',
      'slack-token',
      'slack-app-token',
      'slack-signing-secret',
      'slack-user',
    ]);
    const help = initOptionsHelp(CONNECTORS);
    expect(help).toContain('  --telegram-token TOKEN  the bot token from @BotFather\n');
    // In the column of the command's other options; under one too long for it.
    expect(help).toContain('  --slack-user ID         your Slack member id (U…)');
    expect(help).toContain(`  --slack-signing-secret SECRET\n${' '.repeat(26)}the signing secret for HTTP events`);
  });

  /** A platform init has never heard of, described only by its entry. */
  const matrixInit: ConnectorInit = {
    label: 'Matrix',
    secrets: [
      { variable: 'MATRIX_ACCESS_TOKEN', flag: 'token', what: 'the Matrix access token', help: 'an access token', prompt: 'Matrix access token', example: 'syt_...', check: (v) => (v.startsWith('syt_') ? undefined : 'that is not an access token (syt_…)') },
    ],
    owner: { prompt: 'Your Matrix id', help: 'your Matrix id', example: '@me:example.org', check: (v) => (/^@[^:]+:.+$/.test(v) ? undefined : `${v} is not a Matrix id (@name:server)`) },
    envNotes: ['Matrix: an access token of the bot account.'],
    exampleChat: '!room:example.org',
    primaryNote: 'On Matrix a user id here is your DM with the bot.',
    setUp: 'set MATRIX_ACCESS_TOKEN in .env',
  };
  const matrix: InitConnectorEntry[] = [{ id: 'matrix', parse: (read) => (read.optional('MATRIX_ACCESS_TOKEN') ? { token: read.optional('MATRIX_ACCESS_TOKEN') } : undefined), init: matrixInit }];

  it('a new entry is flagged, checked and written, and no other platform is named', async () => {
    const bad = await run({ name: 'ops', 'matrix-user': 'me' }, { connectors: matrix }).catch((e: unknown) => e);
    expect((bad as ConfigError).message).toBe('--matrix-user me is not a Matrix id (@name:server)');
    expect(fs.readdirSync(cwd)).toEqual([]);

    const { code, output } = await run({ name: 'ops', 'matrix-token': 'syt_abc', 'matrix-user': '@me:example.org' }, { connectors: matrix });
    expect(code).toBe(0);
    const ops = loadPersona(path.join(cwd, 'personas', 'ops'), { connectors: ['terminal', 'matrix'] });
    expect(ops.users).toEqual(['matrix:@me:example.org']);
    expect(ops.primary).toEqual({ connector: 'matrix', to: '@me:example.org' });
    expect(envFile()).toContain('\n# Matrix: an access token of the bot account.\nMATRIX_ACCESS_TOKEN=syt_abc\n');
    expect(output).toContain('Wrote .env with model examples to fill in and the Matrix access token');
    expect(output).toMatch(/^ {2}npm start +run it on Matrix, then message your bot$/m);
    const written = ['connectors.jsonc', 'schedules.jsonc'].map((f) => fs.readFileSync(path.join(cwd, 'personas', 'ops', f), 'utf8'));
    for (const text of [...written, envFile(), output]) expect(text).not.toMatch(/telegram|discord|slack/i);
    expect(written[0]).toContain('// { "connector": "matrix", "chat": "!room:example.org", "mention": true },');
  });

  it('a new entry is asked at a terminal', async () => {
    const { code, output } = await run({}, { connectors: matrix, env: { LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'm' }, answers: ['ops', '', 'nope', 'syt_abc', 'me', '@me:example.org'] });
    expect(code).toBe(0);
    expect(output).toContain('Matrix access token: ');
    expect(output).toContain('  that is not an access token (syt_…)');
    expect(output).toContain('  me is not a Matrix id (@name:server)');
    expect(parseEnvText(envFile()).MATRIX_ACCESS_TOKEN).toBe('syt_abc');
  });

  it("init's own files name no platform: what they say of one comes from its entry", () => {
    for (const file of ['src/cli/init.ts', 'src/cli/init-files.ts', 'src/cli/init-connector.ts']) {
      // Comments may give an example; the code and the text it writes may not.
      const code = fs.readFileSync(path.join(root, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
      expect(code, file).not.toMatch(/telegram|discord|slack|botfather/i);
    }
  });

  it('the commented examples for a platform other than the first load once uncommented', () => {
    const uncomment = (text: string) => text.replace(/^(\s*)\/\/ (?=["{])/gm, '$1');
    const answers = { name: 'mine', owners: { slack: 'U024BE7LH' }, connectors: ['slack', 'discord'] };
    const dir = path.join(cwd, 'examples', 'mine');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'SOUL.md'), soulText(answers));
    fs.writeFileSync(path.join(dir, 'connectors.jsonc'), uncomment(connectorsText(answers, CONNECTORS)));
    fs.writeFileSync(path.join(dir, 'tools.jsonc'), uncomment(toolsText(answers)));
    fs.writeFileSync(path.join(dir, 'schedules.jsonc'), uncomment(schedulesText(answers, CONNECTORS)));
    const mine = loadPersona(dir, { connectors: CONNECTOR_IDS });
    expect(mine.users).toEqual(['discord:80351110224678912', 'slack:U024BE7LH']);
    expect(mine.approvers).toEqual(['slack:U024BE7LH']);
    expect(mine.primary).toEqual({ connector: 'slack', to: 'U024BE7LH' });
    expect(mine.channels).toEqual([{ connector: 'slack', chat: 'C0123ABCD', mention: true }]);
    expect(mine.schedules.map((s) => s.deliver)).toEqual([undefined, { connector: 'slack', to: 'U024BE7LH' }]);
  });

  it('every platform block of .env loads with its examples filled in', () => {
    const text = envText({ provider: 'openai' }, CONNECTORS);
    const filled = text.replace(/^# ([A-Z_]+_(?:TOKEN|SECRET))=.*$/gm, (_line, variable: string) => `${variable}=${{ TELEGRAM_BOT_TOKEN: '1:A', DISCORD_BOT_TOKEN: 'a.b.c', SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1', SLACK_SIGNING_SECRET: 's' }[variable]}`);
    expect(Object.keys(parseSettings(parseEnvText(filled), cwd, CONNECTORS).connectors)).toEqual(['telegram', 'discord', 'slack']);
  });
});
