// `parlor init [name]`: a new persona folder (and, when there is none, a `.env`) from a few answers or flags.
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import { CONNECTOR_IDS, CONNECTORS } from '#connectors/registry.ts';
import { parseEnvText, parseSettings, type Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { loadPersona, PERSONA_NAME } from '#src/config/persona.ts';
import { connectorsText, DEFAULT_SOUL, envText, schedulesText, soulText, toolsText, type EnvAnswers, type PersonaAnswers } from './init-files.ts';

/** The command line's values: the positional name and the flags. */
export interface InitValues {
  name?: string;
  soul?: string;
  model?: string;
  'base-url'?: string;
  provider?: string;
  'api-key'?: string;
  'telegram-token'?: string;
  'telegram-user'?: string;
  yes?: boolean;
}

export interface InitIo {
  cwd: string;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** Questions are asked only at a terminal; piped, nothing waits for input. */
  interactive: boolean;
}

const OLLAMA = 'http://localhost:11434/v1';
/** Flags that set what goes into `.env`. */
const ENV_FLAGS = ['model', 'base-url', 'provider', 'api-key', 'telegram-token'] as const;

const problems = {
  name: (v: string) => (PERSONA_NAME.test(v) ? undefined : `"${v}" is not a persona name: use lowercase letters, digits, - and _ (e.g. "${slug(v)}")`),
  url: (v: string) => (/^https?:\/\/[^/\s]+/i.test(v) && URL.canParse(v) ? undefined : `${v} is not a URL: it needs http:// or https:// in front, e.g. ${OLLAMA}`),
  token: (v: string) => (/^\d+:[\w-]+$/.test(v) ? undefined : 'that does not look like a bot token (digits:letters); copy it from @BotFather'),
  user: (v: string) => (/^\d+$/.test(v) ? undefined : `${v} is not a Telegram user id (digits, e.g. 123456789); the bot tells you yours when you message it`),
};

function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^[-_]+|-+$/g, '') || 'assistant';
}

function shown(file: string, cwd: string): string {
  const rel = path.relative(cwd, file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
}

/** The persona folders already there (not loaded: a broken neighbour must not stop a new persona). */
function existingPersonas(dir: string): string[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).filter((e) => !e.name.startsWith('.') && (e.isDirectory() || e.isSymbolicLink())).map((e) => e.name);
  } catch {
    return [];
  }
}

/** Answers taken from flags alone: checked, with each problem named by its flag. */
function fromFlags(values: InitValues): { persona: Omit<PersonaAnswers, 'name'>; env: EnvAnswers } {
  const provider = values.provider?.trim().toLowerCase() ?? 'openai';
  if (provider !== 'openai' && provider !== 'anthropic') {
    throw new ConfigError(`--provider ${values.provider}: use openai (any OpenAI-compatible endpoint) or anthropic`);
  }
  const baseUrl = values['base-url']?.trim().replace(/\/+$/, '') || undefined;
  const model = values.model?.trim() || undefined;
  const apiKey = values['api-key']?.trim() || undefined;
  const telegramToken = values['telegram-token']?.trim() || undefined;
  const telegramUser = values['telegram-user']?.trim() || undefined;
  const problem =
    (baseUrl && problems.url(baseUrl) && `--base-url ${problems.url(baseUrl)}`) ||
    (!model && (baseUrl || apiKey || values.provider) && '--model is missing: name the model, e.g. --model llama3.1 (the other model options need it)') ||
    (model && provider === 'anthropic' && !apiKey && '--provider anthropic needs --api-key (an Anthropic key, sk-ant-...)') ||
    (model && provider === 'openai' && !baseUrl && !apiKey &&
      `--model ${model} without --base-url means OpenAI's own API, which needs --api-key; for a local server give --base-url, e.g. ${OLLAMA}`) ||
    (telegramToken && problems.token(telegramToken) && `--telegram-token: ${problems.token(telegramToken)}`) ||
    (telegramUser && problems.user(telegramUser) && `--telegram-user ${problems.user(telegramUser)}`);
  if (problem) throw new ConfigError(problem);
  return { persona: { soul: values.soul, telegramUser }, env: { provider, baseUrl, model, apiKey, telegramToken } };
}

/** `parlor init`: returns the exit code; a mistake is a ConfigError (one line, exit 2) and nothing is written. */
export async function init(settings: Settings, values: InitValues, io: InitIo = processIo()): Promise<number> {
  const envFile = path.join(io.cwd, '.env');
  const envExists = fs.existsSync(envFile);
  const flagged = ENV_FLAGS.some((f) => values[f] !== undefined) || values.soul !== undefined || values['telegram-user'] !== undefined;
  if (values.name !== undefined) checkFreeName(values.name, settings, io.cwd);
  const given = fromFlags(values);
  if (envExists && ENV_FLAGS.some((f) => values[f] !== undefined)) {
    throw new ConfigError(
      `${shown(envFile, io.cwd)} already exists and parlor init never changes it: put those settings in it yourself, or leave out --${ENV_FLAGS.filter((f) => values[f] !== undefined).join(', --')}`,
    );
  }

  let answers: { persona: PersonaAnswers; env?: EnvAnswers };
  if (io.interactive && !values.yes && !flagged) {
    const asked = await askQuestions(settings, values, io, envExists);
    if (!asked) {
      io.output.write('\nStopped; nothing was written.\n');
      return 130;
    }
    answers = asked;
  } else {
    const existing = existingPersonas(settings.personasDir);
    const name = values.name ?? (existing.length === 0 ? 'assistant' : undefined);
    if (!name) {
      throw new ConfigError(`name the new persona: parlor init <name> (${shown(settings.personasDir, io.cwd)} already has ${existing.join(', ')})`);
    }
    checkFreeName(name, settings, io.cwd);
    answers = { persona: { name, ...given.persona }, env: envExists ? undefined : given.env };
  }

  const written = writeFiles(settings, io.cwd, answers.persona, answers.env);
  io.output.write(summary(settings, io.cwd, answers.persona, answers.env, written));
  return 0;
}

function processIo(): InitIo {
  return { cwd: process.cwd(), input: process.stdin, output: process.stdout, interactive: Boolean(process.stdin.isTTY && process.stdout.isTTY) };
}

function checkFreeName(name: string, settings: Settings, cwd: string): void {
  const problem = problems.name(name);
  if (problem) throw new ConfigError(problem);
  const dir = path.join(settings.personasDir, name);
  if (fs.existsSync(dir)) throw new ConfigError(`${shown(dir, cwd)} already exists and parlor init never overwrites a persona; pick another name`);
}

/** Writes the persona folder, checks it with the loader, then the `.env`; on any failure, removes what it wrote. */
function writeFiles(settings: Settings, cwd: string, persona: PersonaAnswers, env: EnvAnswers | undefined): { dir: string; envFile?: string } {
  const envContent = env ? envText(env) : undefined;
  // What `.env` says must start Parlor: checked by the same parser every command runs, before anything is written.
  if (envContent !== undefined) {
    try {
      parseSettings(parseEnvText(envContent), cwd, CONNECTORS);
    } catch (err) {
      if (err instanceof ConfigError) throw new ConfigError(`the .env these settings make would not load: ${err.message}`);
      throw err;
    }
  }
  const madeRoot = !fs.existsSync(settings.personasDir);
  const dir = path.join(settings.personasDir, persona.name);
  fs.mkdirSync(settings.personasDir, { recursive: true });
  try {
    // Not recursive: a folder that appeared since the check is refused, never written into.
    fs.mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ConfigError(`${shown(dir, cwd)} already exists and parlor init never overwrites a persona; pick another name`);
    throw err;
  }
  const envFile = path.join(cwd, '.env');
  try {
    fs.writeFileSync(path.join(dir, 'SOUL.md'), soulText(persona));
    fs.writeFileSync(path.join(dir, 'connectors.jsonc'), connectorsText(persona));
    fs.writeFileSync(path.join(dir, 'tools.jsonc'), toolsText(persona));
    fs.writeFileSync(path.join(dir, 'schedules.jsonc'), schedulesText(persona));
    fs.mkdirSync(path.join(dir, 'workspace'));
    loadPersona(dir, { connectors: CONNECTOR_IDS });
    if (envContent !== undefined) {
      try {
        fs.writeFileSync(envFile, envContent, { flag: 'wx', mode: 0o600 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ConfigError(`${shown(envFile, cwd)} already exists and parlor init never changes it`);
        throw err;
      }
    }
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    if (madeRoot) fs.rmSync(settings.personasDir, { recursive: true, force: true });
    throw err;
  }
  return { dir, envFile: envContent !== undefined ? envFile : undefined };
}

function summary(settings: Settings, cwd: string, persona: PersonaAnswers, env: EnvAnswers | undefined, written: { dir: string; envFile?: string }): string {
  const { name } = persona;
  const lines = [
    `Wrote ${shown(written.dir, cwd)}/`,
    `  SOUL.md            who ${name} is and how it speaks: edit it freely`,
    `  connectors.jsonc   who may talk to it${persona.telegramUser ? ` (telegram:${persona.telegramUser}, also its primary)` : ''}, and where it lives`,
    '  tools.jsonc        which tools ask first (approve, allow, deny)',
    '  schedules.jsonc    heartbeat and cron entries (none yet; two examples in comments)',
    '  workspace/         its files: its file and shell tools stay inside',
  ];
  if (written.envFile) {
    const holds = [env?.model ? `the model (${env.model})` : 'model examples to fill in', env?.telegramToken ? 'the Telegram bot token' : undefined];
    lines.push(`Wrote ${shown(written.envFile, cwd)} with ${holds.filter(Boolean).join(' and ')}`);
  }
  const hasModel = Boolean(settings.llm || env?.model);
  const hasTelegram = Boolean(settings.connectors.telegram !== undefined || env?.telegramToken);
  lines.push('');
  if (!hasModel && written.envFile) {
    lines.push(
      'No model is set yet: in .env, remove the # in front of one of the examples and fill it in (for Ollama,',
      `LLM_BASE_URL=${OLLAMA} and LLM_MODEL=llama3.1); then \`npx parlor doctor\` checks that it answers.`,
      '',
    );
  } else if (!hasModel) {
    lines.push(
      'No model is set yet: add it to .env, each setting on a line of its own, e.g. for Ollama',
      `  LLM_PROVIDER=openai\n  LLM_BASE_URL=${OLLAMA}\n  LLM_MODEL=llama3.1`,
      'or for Anthropic LLM_PROVIDER=anthropic, LLM_API_KEY=sk-ant-... and LLM_MODEL=claude-sonnet-4-5;',
      'then `npx parlor doctor` checks that it answers.',
      '',
    );
  }
  const next: [string, string][] = [[`npx parlor chat --persona ${name}`, 'talk to it in this terminal']];
  if (hasTelegram) next.push(['npm start', `run it on Telegram${persona.telegramUser ? ', then message your bot' : ''}`]);
  const width = Math.max(...next.map(([command]) => command.length)) + 4;
  lines.push(hasModel ? 'Next:' : 'Then:', ...next.map(([command, what]) => `  ${command.padEnd(width)}${what}`));
  if (hasTelegram && !persona.telegramUser) {
    lines.push(`Your bot answers strangers with their address: add yours to "users" in ${path.join(shown(written.dir, cwd), 'connectors.jsonc')}.`);
  } else if (!hasTelegram && persona.telegramUser) {
    lines.push('To reach it on Telegram, set TELEGRAM_BOT_TOKEN in .env (a bot token from @BotFather) and run npm start.');
  }
  return `${lines.join('\n')}\n`;
}

/** The questions asked at a terminal; undefined when the person quit (Ctrl-C or Ctrl-D) before the last answer. */
async function askQuestions(settings: Settings, values: InitValues, io: InitIo, envExists: boolean): Promise<{ persona: PersonaAnswers; env?: EnvAnswers } | undefined> {
  const rl = createInterface({ input: io.input, output: io.output, terminal: Boolean((io.output as { isTTY?: boolean }).isTTY) });
  // Lines are taken from the iterator, which buffers them: typed ahead, or pasted, none is lost.
  const lines = rl[Symbol.asyncIterator]();
  let quit = false;
  rl.on('SIGINT', () => {
    quit = true;
    rl.close();
  });
  /** Asks until `check` accepts the answer (blank takes the default); undefined when input ends. */
  const ask: Ask = async (question, fallback = '', check) => {
    for (;;) {
      rl.setPrompt(`${question}${fallback ? ` [${fallback}]` : ''}: `);
      rl.prompt();
      const next = await lines.next();
      if (next.done || quit) return undefined;
      const answer = (next.value as string).trim() || fallback;
      const problem = answer ? check?.(answer) : undefined;
      if (!problem) return answer;
      io.output.write(`  ${problem}\n`);
    }
  };
  try {
    const existing = existingPersonas(settings.personasDir);
    let name = values.name;
    while (name === undefined) {
      const answer = await ask('Persona name (lowercase letters, digits, - and _)', existing.length === 0 ? 'assistant' : '', problems.name);
      if (answer === undefined) return undefined;
      if (!answer) continue;
      if (fs.existsSync(path.join(settings.personasDir, answer))) io.output.write(`  ${answer} already exists (there are: ${existing.join(', ')}); pick another name\n`);
      else name = answer;
    }
    const soul = await ask(`Who is ${name}, in one line`, DEFAULT_SOUL);
    if (soul === undefined) return undefined;
    const persona: PersonaAnswers = { name, soul };

    let env: EnvAnswers | undefined;
    if (envExists) {
      io.output.write('Keeping .env as it is: the model and tokens stay as they are there.\n');
    } else if (settings.llm) {
      io.output.write(`The model comes from the environment (LLM_MODEL=${settings.llm.model}); .env gets examples only.\n`);
      env = { provider: 'openai' };
    } else {
      const model = await askModel(ask, io);
      if (model === undefined) return undefined;
      env = model;
    }
    if (env) {
      const token = await ask('Telegram bot token from @BotFather (blank to skip)', '', problems.token);
      if (token === undefined) return undefined;
      env.telegramToken = token || undefined;
    }
    if (settings.connectors.telegram !== undefined || env?.telegramToken) {
      const user = await ask('Your Telegram user id, so the bot answers you (blank: the bot tells you when you message it)', '', problems.user);
      if (user === undefined) return undefined;
      persona.telegramUser = user || undefined;
    }
    return { persona, env };
  } finally {
    rl.close();
  }
}

type Ask = (question: string, fallback?: string, check?: (v: string) => string | undefined) => Promise<string | undefined>;

/** The model questions: endpoint, key, then the name, with the endpoint's own models suggested. */
async function askModel(ask: Ask, io: InitIo): Promise<EnvAnswers | undefined> {
  const endpoint = await ask('Model endpoint: an OpenAI-compatible URL, or "anthropic"', OLLAMA, (v) => (v.toLowerCase() === 'anthropic' ? undefined : problems.url(v)));
  if (endpoint === undefined) return undefined;
  const provider = endpoint.toLowerCase() === 'anthropic' ? 'anthropic' : 'openai';
  const baseUrl = provider === 'openai' ? endpoint.replace(/\/+$/, '') : undefined;
  let apiKey: string | undefined = '';
  // Anthropic needs its key: without one every start would stop at LLM_API_KEY.
  do apiKey = await ask(provider === 'anthropic' ? 'Anthropic API key (sk-ant-...)' : 'API key (blank if the server needs none)');
  while (apiKey === '' && provider === 'anthropic');
  if (apiKey === undefined) return undefined;
  const served = await listModels(provider, baseUrl, apiKey);
  if (served.models.length) io.output.write(`  it serves: ${served.models.slice(0, 8).join(', ')}${served.models.length > 8 ? ', …' : ''}\n`);
  else if (served.problem) io.output.write(`  could not list its models (${served.problem}); you can still name one\n`);
  const suggestion = served.models[0] ?? (provider === 'anthropic' ? 'claude-sonnet-4-5' : baseUrl === OLLAMA ? 'llama3.1' : '');
  const model = await ask('Model name (blank to set it in .env later)', suggestion);
  if (model === undefined) return undefined;
  return model ? { provider, baseUrl, model, apiKey: apiKey || undefined } : { provider: 'openai' };
}

/** The models an endpoint lists, to suggest one; a few seconds at most, and a failure only means no suggestion. */
async function listModels(provider: 'openai' | 'anthropic', baseUrl: string | undefined, apiKey: string): Promise<{ models: string[]; problem?: string }> {
  if (provider === 'anthropic' && !apiKey) return { models: [] };
  const url = provider === 'anthropic' ? `${(baseUrl ?? 'https://api.anthropic.com').replace(/\/v1$/, '')}/v1/models` : `${baseUrl}/models`;
  const headers: Record<string, string> =
    provider === 'anthropic' ? { 'x-api-key': apiKey, 'anthropic-version': '2023-06-01' } : apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  try {
    const response = await fetch(url, { headers, signal: AbortSignal.timeout(3000) });
    if (!response.ok) return { models: [], problem: `${url} answered HTTP ${response.status}${response.status === 404 && !/\/v1$/.test(baseUrl ?? '') ? '; most servers want the URL to end in /v1' : ''}` };
    const body = (await response.json()) as { data?: { id?: unknown }[] };
    return { models: (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string') };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
    return { models: [], problem: `${new URL(url).origin}: ${cause === 'TimeoutError' ? 'no answer within 3 s' : cause}` };
  }
}
