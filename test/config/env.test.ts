// Settings from the environment: every mistake is a ConfigError that names the variable.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it, expect, afterEach } from 'vitest';
import { CONNECTORS } from '#connectors/registry.ts';
import { loadDotEnv, parseSettings, requireModel, settingSecrets } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';

const CWD = path.join(os.tmpdir(), 'parlor-env-test-cwd');
// Parsed with the connector registry, as the command line does.
const parse = (env: Record<string, string>) => parseSettings(env, CWD, CONNECTORS);

/** The ConfigError thrown by `fn`; fails if it does not throw or throws something else. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

/** A one-line ConfigError naming `variable`. */
function expectOneLine(fn: () => unknown, variable: string): ConfigError {
  const err = configError(fn);
  expect(err.message).toContain(variable);
  expect(err.message).not.toContain('\n');
  return err;
}

describe('parseSettings defaults', () => {
  it('uses .parlor, personas, 127.0.0.1:8787, UTC and info, with no model and no connectors', () => {
    const s = parse({});
    expect(s.home).toBe(path.join(CWD, '.parlor'));
    expect(s.personasDir).toBe(path.join(CWD, 'personas'));
    expect(s.http).toEqual({ port: 8787, host: '127.0.0.1', apiToken: undefined });
    expect(s.timezone).toBe('UTC');
    expect(s.logLevel).toBe('info');
    expect(s.llm).toBeUndefined();
    expect(s.databaseUrl).toBeUndefined();
    expect(s.connectors).toEqual({});
  });

  it('treats blank values as unset', () => {
    const s = parse({ PARLOR_HTTP_PORT: '  ', PARLOR_TIMEZONE: '', LLM_MODEL: ' ' });
    expect(s.http.port).toBe(8787);
    expect(s.timezone).toBe('UTC');
    expect(s.llm).toBeUndefined();
  });

  it('takes explicit values, resolving folders against cwd and trimming trailing slashes from URLs', () => {
    const s = parse({
      PARLOR_HOME: 'state', PARLOR_PERSONAS_DIR: '/srv/personas', PARLOR_HTTP_PORT: '9000', PARLOR_HTTP_HOST: '0.0.0.0',
      PARLOR_TIMEZONE: 'Europe/Berlin', LOG_LEVEL: 'DEBUG', DATABASE_URL: 'postgres://u:p@localhost:5432/parlor/',
    });
    expect(s.home).toBe(path.join(CWD, 'state'));
    expect(s.personasDir).toBe('/srv/personas');
    expect(s.http.port).toBe(9000);
    expect(s.http.host).toBe('0.0.0.0');
    expect(s.timezone).toBe('Europe/Berlin');
    expect(s.logLevel).toBe('debug');
    expect(s.databaseUrl).toBe('postgres://u:p@localhost:5432/parlor');
  });
});

describe('model settings', () => {
  it('requireModel without LLM_MODEL explains LLM_MODEL with examples', () => {
    const err = configError(() => requireModel(parse({})));
    expect(err.message).toContain('LLM_MODEL');
    expect(err.message).toContain('LLM_PROVIDER=openai');
    expect(err.message).toContain('LLM_PROVIDER=anthropic');
    expect(err.message).toContain('LLM_BASE_URL=http://localhost:11434/v1');
    expect(err.message.split('\n').length).toBeGreaterThan(2);
  });

  it('requireModel returns the model settings', () => {
    const llm = requireModel(parse({ LLM_MODEL: 'gpt-4.1-mini', LLM_API_KEY: 'sk-x' }));
    expect(llm).toEqual({ provider: 'openai', model: 'gpt-4.1-mini', apiKey: 'sk-x', baseUrl: undefined, retryDeadlineMs: 90_000, stallMs: 180_000 });
  });

  it('LLM_MODEL with neither key nor base URL names LLM_API_KEY', () => {
    const err = expectOneLine(() => parse({ LLM_MODEL: 'gpt-4.1-mini' }), 'LLM_API_KEY');
    expect(err.message).toContain('LLM_BASE_URL');
  });

  it('an OpenAI-compatible local server needs only a base URL', () => {
    const s = parse({ LLM_MODEL: 'llama3.1', LLM_BASE_URL: 'http://localhost:11434/v1/' });
    expect(s.llm).toEqual({ provider: 'openai', model: 'llama3.1', baseUrl: 'http://localhost:11434/v1', apiKey: undefined, retryDeadlineMs: 90_000, stallMs: 180_000 });
    expect(parse({ LLM_MODEL: 'm', LLM_BASE_URL: 'http://x', LLM_RETRY_SECONDS: '5' }).llm?.retryDeadlineMs).toBe(5000);
    expectOneLine(() => parse({ LLM_MODEL: 'm', LLM_BASE_URL: 'http://x', LLM_RETRY_SECONDS: 'soon' }), 'LLM_RETRY_SECONDS');
    expect(parse({ LLM_MODEL: 'm', LLM_BASE_URL: 'http://x', LLM_STALL_SECONDS: '30' }).llm?.stallMs).toBe(30_000);
    for (const bad of ['0', 'soon', '1.5']) expectOneLine(() => parse({ LLM_MODEL: 'm', LLM_BASE_URL: 'http://x', LLM_STALL_SECONDS: bad }), 'LLM_STALL_SECONDS');
  });

  it('anthropic needs a key even with a base URL', () => {
    expectOneLine(() => parse({ LLM_PROVIDER: 'anthropic', LLM_MODEL: 'claude-sonnet-4-5' }), 'LLM_API_KEY');
    const err = expectOneLine(
      () => parse({ LLM_PROVIDER: 'anthropic', LLM_MODEL: 'claude-sonnet-4-5', LLM_BASE_URL: 'https://proxy.example' }),
      'LLM_API_KEY',
    );
    expect(err.message).toContain('Anthropic');
    const s = parse({ LLM_PROVIDER: 'Anthropic', LLM_MODEL: 'claude-sonnet-4-5', LLM_API_KEY: 'sk-ant-x' });
    expect(s.llm?.provider).toBe('anthropic');
  });

  it('a key or base URL without LLM_MODEL is an error naming LLM_MODEL', () => {
    expectOneLine(() => parse({ LLM_API_KEY: 'sk-x' }), 'LLM_MODEL');
    expectOneLine(() => parse({ LLM_BASE_URL: 'http://localhost:11434/v1' }), 'LLM_MODEL');
  });

  it('rejects an unknown LLM_PROVIDER', () => {
    const err = expectOneLine(() => parse({ LLM_PROVIDER: 'gemini', LLM_MODEL: 'x', LLM_API_KEY: 'k' }), 'LLM_PROVIDER');
    expect(err.message).toContain('gemini');
  });
});

describe('bad values name their variable on one line', () => {
  it.each(['80a', '65536', '-1', '1.5', 'http'])('PARLOR_HTTP_PORT=%s', (value) => {
    expectOneLine(() => parse({ PARLOR_HTTP_PORT: value }), 'PARLOR_HTTP_PORT');
  });

  it.each(['0', '1001', '2.5', 'many'])('PARLOR_TURN_CONCURRENCY=%s', (value) => {
    expectOneLine(() => parse({ PARLOR_TURN_CONCURRENCY: value }), 'PARLOR_TURN_CONCURRENCY');
  });

  it('takes a turn concurrency, and leaves it unset (the default) when not given', () => {
    expect(parse({ PARLOR_TURN_CONCURRENCY: '4' }).turnConcurrency).toBe(4);
    expect(parse({}).turnConcurrency).toBeUndefined();
  });

  it.each(['4', '3601', '30s', '7.5'])('PARLOR_HUNG_AFTER_SECONDS=%s', (value) => {
    expectOneLine(() => parse({ PARLOR_HUNG_AFTER_SECONDS: value }), 'PARLOR_HUNG_AFTER_SECONDS');
  });

  it('takes how long a process may go without its heartbeat, and leaves it unset (the default) when not given', () => {
    expect(parse({ PARLOR_HUNG_AFTER_SECONDS: '5' }).hungAfterSeconds).toBe(5);
    expect(parse({}).hungAfterSeconds).toBeUndefined();
  });

  it('accepts the port range ends', () => {
    expect(parse({ PARLOR_HTTP_PORT: '0' }).http.port).toBe(0);
    expect(parse({ PARLOR_HTTP_PORT: '65535' }).http.port).toBe(65535);
  });

  it.each(['Mars/Olympus_Mons', 'CEST+99', 'not a zone'])('PARLOR_TIMEZONE=%s', (value) => {
    expectOneLine(() => parse({ PARLOR_TIMEZONE: value }), 'PARLOR_TIMEZONE');
  });

  it.each(['verbose', 'warning', 'all'])('LOG_LEVEL=%s', (value) => {
    expectOneLine(() => parse({ LOG_LEVEL: value }), 'LOG_LEVEL');
  });

  it.each([
    ['LLM_BASE_URL', 'ftp://models.example/v1', { LLM_MODEL: 'm' }],
    ['LLM_BASE_URL', 'localhost:11434/v1', { LLM_MODEL: 'm' }],
    ['LLM_BASE_URL', 'not a url', { LLM_MODEL: 'm' }],
    ['DATABASE_URL', 'mysql://u:p@localhost/parlor', {}],
    ['DATABASE_URL', 'http://localhost:5432/parlor', {}],
    ['DATABASE_URL', '/var/run/postgresql', {}],
  ])('%s=%s', (name, value, extra) => {
    expectOneLine(() => parse({ ...extra, [name]: value }), name);
  });

  it('accepts postgresql:// for DATABASE_URL', () => {
    expect(parse({ DATABASE_URL: 'postgresql://localhost/parlor' }).databaseUrl).toBe('postgresql://localhost/parlor');
  });
});

describe('connectors', () => {
  it('checks the shape of TELEGRAM_BOT_TOKEN', () => {
    expectOneLine(() => parse({ TELEGRAM_BOT_TOKEN: 'not-a-token' }), 'TELEGRAM_BOT_TOKEN');
    expectOneLine(() => parse({ TELEGRAM_BOT_TOKEN: 'abc:DEF' }), 'TELEGRAM_BOT_TOKEN');
    expectOneLine(() => parse({ TELEGRAM_BOT_TOKEN: '123456 :ABC' }), 'TELEGRAM_BOT_TOKEN');
    const s = parse({ TELEGRAM_BOT_TOKEN: '123456789:AAH-x_yZ', TELEGRAM_WEBHOOK_URL: 'https://bot.example/tg' });
    expect(s.connectors.telegram).toEqual({ token: '123456789:AAH-x_yZ', apiRoot: undefined, webhookUrl: 'https://bot.example/tg' });
  });

  it('checks the telegram URLs', () => {
    expectOneLine(() => parse({ TELEGRAM_BOT_TOKEN: '1:a', TELEGRAM_API_ROOT: 'ws://api.example' }), 'TELEGRAM_API_ROOT');
  });

  it('slack needs an app token or a signing secret', () => {
    const err = expectOneLine(() => parse({ SLACK_BOT_TOKEN: 'xoxb-1' }), 'SLACK_APP_TOKEN');
    expect(err.message).toContain('SLACK_SIGNING_SECRET');
    expect(parse({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1' }).connectors.slack)
      .toMatchObject({ botToken: 'xoxb-1', appToken: 'xapp-1', signingSecret: undefined });
    expect(parse({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_SIGNING_SECRET: 's3cret' }).connectors.slack)
      .toMatchObject({ botToken: 'xoxb-1', signingSecret: 's3cret' });
  });

  it('discord starts with just a token', () => {
    expect(parse({ DISCORD_BOT_TOKEN: 'abc.def.ghi' }).connectors).toEqual({ discord: { token: 'abc.def.ghi', apiUrl: undefined } });
  });
});

describe('loadDotEnv', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('reads .env from cwd without overriding variables already set', () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-env-'));
    fs.writeFileSync(
      path.join(dir, '.env'),
      [
        '# a comment',
        'LLM_MODEL=from-file',
        'LLM_API_KEY="sk-from-file"',
        "PARLOR_TIMEZONE='Europe/Paris'",
        'EMPTY_BEFORE=from-file',
        'export LOG_LEVEL=debug',
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = { LLM_MODEL: 'from-env', EMPTY_BEFORE: '' };
    loadDotEnv(env, dir);
    expect(env.LLM_MODEL).toBe('from-env');
    expect(env.LLM_API_KEY).toBe('sk-from-file');
    expect(env.PARLOR_TIMEZONE).toBe('Europe/Paris');
    expect(env.EMPTY_BEFORE).toBe('');
    expect(env.LOG_LEVEL).toBe('debug');
    expect(parseSettings(env, dir).llm).toMatchObject({ model: 'from-env', apiKey: 'sk-from-file' });
  });

  it('does nothing when there is no .env', () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-env-'));
    const env: NodeJS.ProcessEnv = { A: '1' };
    loadDotEnv(env, dir);
    expect(env).toEqual({ A: '1' });
  });

  it('a .env that cannot be read is a ConfigError naming the file', () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-env-'));
    fs.mkdirSync(path.join(dir, '.env')); // a folder: reading it fails with EISDIR
    const err = configError(() => loadDotEnv({}, dir));
    expect(err.message).toContain(path.join(dir, '.env'));
  });
});

describe('PARLOR_API_TOKEN', () => {
  it('is taken when it is a usable bearer token', () => {
    expect(parseSettings({ PARLOR_API_TOKEN: 'a1b2c3d4e5f6a7b8c9d0' }).http.apiToken).toBe('a1b2c3d4e5f6a7b8c9d0');
  });

  it('refuses characters an Authorization header cannot carry, and tokens too short to be secret', () => {
    expect(expectOneLine(() => parseSettings({ PARLOR_API_TOKEN: 'has spaces in it, sadly' }), 'PARLOR_API_TOKEN').message).toMatch(/only letters, digits/);
    expect(expectOneLine(() => parseSettings({ PARLOR_API_TOKEN: 'short' }), 'PARLOR_API_TOKEN').message).toMatch(/too short/);
  });
});

describe('errors quote what the user wrote', () => {
  it('a line of several settings pasted together is quoted as written, with a hint, never lowercased', () => {
    const err = expectOneLine(() => parse({ LLM_PROVIDER: 'openai LLM_BASE_URL=http://localhost:11434/v1 LLM_MODEL=llama3.1' }), 'LLM_PROVIDER');
    expect(err.message).toBe(
      'LLM_PROVIDER=openai LLM_BASE_URL=http://localhost:11434/v1 LLM_MODEL=llama3.1 is not supported; use openai (any OpenAI-compatible endpoint) or anthropic (it looks like several settings on one line; put each NAME=value on a line of its own)',
    );
  });

  it('a URL without a scheme is quoted as written, with an example', () => {
    const err = expectOneLine(() => parse({ LLM_BASE_URL: 'localhost:11434/v1', LLM_MODEL: 'm' }), 'LLM_BASE_URL');
    expect(err.message).toBe('LLM_BASE_URL=localhost:11434/v1 is not a URL: it needs http:// or https:// in front, e.g. http://localhost:11434/v1');
  });

  it('a URL with the wrong scheme says which', () => {
    expect(configError(() => parse({ LLM_BASE_URL: 'ftp://models.example/v1', LLM_MODEL: 'm' })).message).toBe(
      'LLM_BASE_URL=ftp://models.example/v1 must start with http:// or https://, not ftp://',
    );
  });

  it('never repeats a database URL, which may hold a password', () => {
    const err = configError(() => parse({ DATABASE_URL: 'localhost:5432/parlor?password=hunter2' }));
    expect(err.message).not.toContain('hunter2');
    expect(err.message).toContain('DATABASE_URL is not a URL');
  });

  it('LOG_LEVEL is quoted as written', () => {
    expect(configError(() => parse({ LOG_LEVEL: 'Verbose' })).message).toBe('LOG_LEVEL=Verbose is not one of fatal, error, warn, info, debug, trace, silent');
  });
});

describe('connectors come from the registry', () => {
  it('without the registry, the core reads no platform settings; with it, each entry reads its own, and their secrets are masked', () => {
    expect(parseSettings({ TELEGRAM_BOT_TOKEN: 'not-a-token' }, CWD).connectors).toEqual({});
    const settings = parse({ TELEGRAM_BOT_TOKEN: '123456789:AAH-x_yZ', SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1' });
    expect(Object.keys(settings.connectors).sort()).toEqual(['slack', 'telegram']);
    expect(settingSecrets(settings, CONNECTORS)).toEqual(expect.arrayContaining(['123456789:AAH-x_yZ', 'xoxb-1', 'xapp-1']));
  });
});
