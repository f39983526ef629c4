// Where `parlor init`'s answers come from: its flags, checked (each problem named by its flag), or questions at a
// terminal. Each platform's flags, questions and checks come from its registry entry (ConnectorInit).
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { PERSONA_NAME } from '#src/config/persona.ts';
import { ownerFlag, secretFlag, type InitPlatform } from './init-connector.ts';
import { DEFAULT_SOUL, type EnvAnswers, type PersonaAnswers } from './init-files.ts';

/**
 * The command line's values: the positional name and the flags, among them each platform's
 * (`--<connector>-token`, `--<connector>-user`, ...; see initOptions).
 */
export interface InitValues {
  name?: string;
  soul?: string;
  model?: string;
  'base-url'?: string;
  provider?: string;
  'api-key'?: string;
  yes?: boolean;
  [platformFlag: string]: string | boolean | undefined;
}

export interface InitIo {
  cwd: string;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** Questions are asked only at a terminal; piped, nothing waits for input. */
  interactive: boolean;
}

export const OLLAMA = 'http://localhost:11434/v1';
/** The model's flags, which set what goes into `.env` (each platform adds its secrets' flags). */
export const MODEL_FLAGS = ['model', 'base-url', 'provider', 'api-key'] as const;

export const problems = {
  name: (v: string) => (PERSONA_NAME.test(v) ? undefined : `"${v}" is not a persona name: use lowercase letters, digits, - and _ (e.g. "${slug(v)}")`),
  url: (v: string) => (/^https?:\/\/[^/\s]+/i.test(v) && URL.canParse(v) ? undefined : `${v} is not a URL: it needs http:// or https:// in front, e.g. ${OLLAMA}`),
};

function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^[-_]+|-+$/g, '') || 'assistant';
}

/** The persona folders already there (not loaded: a broken neighbour must not stop a new persona). */
export function existingPersonas(dir: string): string[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).filter((e) => !e.name.startsWith('.') && (e.isDirectory() || e.isSymbolicLink())).map((e) => e.name);
  } catch {
    return [];
  }
}

/** A flag's text, trimmed; undefined when it is absent or blank. */
function flagText(values: InitValues, flag: string): string | undefined {
  const value = values[flag];
  return typeof value === 'string' ? value.trim() || undefined : undefined;
}

/** An owner's id as typed: the address the bot names to strangers (`<connector>:<id>`) is taken as the id. */
function ownerId(platform: InitPlatform, text: string): string {
  return text.toLowerCase().startsWith(`${platform.id}:`) ? text.slice(platform.id.length + 1).trim() : text;
}

/** Why a platform's flags do not go together (a secret without its token, a token without a way of receiving). */
function platformFlagsProblem(platform: InitPlatform, given: Record<string, string>): string | undefined {
  const [token, ...rest] = platform.init.secrets;
  const strays = rest.filter((s) => given[s.variable]);
  if (!given[token.variable] && strays.length) return `--${secretFlag(platform, strays[0])} needs --${secretFlag(platform, token)} too (${token.what})`;
  const modes = rest.filter((s) => s.mode);
  if (given[token.variable] && modes.length && !modes.some((s) => given[s.variable])) {
    return `--${secretFlag(platform, token)} needs ${modes.map((s) => `--${secretFlag(platform, s)} (${s.mode})`).join(' or ')}`;
  }
  return undefined;
}

/** Answers taken from flags alone: checked, with each problem named by its flag. */
export function fromFlags(values: InitValues, platforms: readonly InitPlatform[]): { persona: Omit<PersonaAnswers, 'name'>; env: EnvAnswers } {
  const provider = values.provider?.trim().toLowerCase() ?? 'openai';
  if (provider !== 'openai' && provider !== 'anthropic') {
    throw new ConfigError(`--provider ${values.provider}: use openai (any OpenAI-compatible endpoint) or anthropic`);
  }
  const baseUrl = values['base-url']?.trim().replace(/\/+$/, '') || undefined;
  const model = values.model?.trim() || undefined;
  const apiKey = values['api-key']?.trim() || undefined;
  const problem =
    (baseUrl && problems.url(baseUrl) && `--base-url ${problems.url(baseUrl)}`) ||
    (!model && (baseUrl || apiKey || values.provider) && '--model is missing: name the model, e.g. --model llama3.1 (the other model options need it)') ||
    (model && provider === 'anthropic' && !apiKey && '--provider anthropic needs --api-key (an Anthropic key, sk-ant-...)') ||
    (model && provider === 'openai' && !baseUrl && !apiKey &&
      `--model ${model} without --base-url means OpenAI's own API, which needs --api-key; for a local server give --base-url, e.g. ${OLLAMA}`);
  if (problem) throw new ConfigError(problem);

  const secrets: Record<string, string> = {};
  const owners: Record<string, string> = {};
  for (const platform of platforms) {
    const given: Record<string, string> = {};
    for (const secret of platform.init.secrets) {
      const value = flagText(values, secretFlag(platform, secret));
      if (value === undefined) continue;
      const wrong = secret.check(value);
      if (wrong) throw new ConfigError(`--${secretFlag(platform, secret)}: ${wrong}`);
      given[secret.variable] = value;
    }
    const together = platformFlagsProblem(platform, given);
    if (together) throw new ConfigError(together);
    Object.assign(secrets, given);
    const owner = flagText(values, ownerFlag(platform));
    if (owner === undefined) continue;
    const id = ownerId(platform, owner);
    const wrong = platform.init.owner.check(id);
    if (wrong) throw new ConfigError(`--${ownerFlag(platform)} ${wrong}`);
    owners[platform.id] = id;
  }
  return { persona: { soul: values.soul, owners }, env: { provider, baseUrl, model, apiKey, secrets } };
}

/** The questions asked at a terminal; undefined when the person quit (Ctrl-C or Ctrl-D) before the last answer. */
export async function askQuestions(
  settings: Settings,
  values: InitValues,
  io: InitIo,
  envExists: boolean,
  platforms: readonly InitPlatform[],
): Promise<{ persona: PersonaAnswers; env?: EnvAnswers } | undefined> {
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
    const owners: Record<string, string> = {};
    const persona: PersonaAnswers = { name, soul, owners };

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
    // Each platform in turn: its token and what goes with it (only while .env is being written), then your id on it.
    const secrets: Record<string, string> = {};
    for (const platform of platforms) {
      if (env) {
        const given = await askSecrets(ask, io, platform);
        if (given === undefined) return undefined;
        Object.assign(secrets, given);
      }
      if (settings.connectors[platform.id] !== undefined || secrets[platform.init.secrets[0].variable]) {
        const user = await ask(platform.init.owner.prompt, '', (v) => platform.init.owner.check(ownerId(platform, v)));
        if (user === undefined) return undefined;
        if (user) owners[platform.id] = ownerId(platform, user);
      }
    }
    if (env) env.secrets = secrets;
    return { persona, env };
  } finally {
    rl.close();
  }
}

type Ask = (question: string, fallback?: string, check?: (v: string) => string | undefined) => Promise<string | undefined>;

/**
 * A platform's secrets: its token (blank skips the platform), then the rest; when some pick a way of receiving,
 * they are asked until one is given. Undefined when input ends.
 */
async function askSecrets(ask: Ask, io: InitIo, platform: InitPlatform): Promise<Record<string, string> | undefined> {
  const [token, ...rest] = platform.init.secrets;
  const first = await ask(token.prompt, '', token.check);
  if (!first) return first === undefined ? undefined : {};
  const given: Record<string, string> = { [token.variable]: first };
  const modes = rest.filter((s) => s.mode);
  for (let round = 0; ; round++) {
    for (const secret of rest) {
      // Secrets that pick no way of receiving are asked once; the others until one is given.
      if (secret.mode ? modes.some((s) => given[s.variable]) : round > 0) continue;
      const value = await ask(secret.prompt, '', secret.check);
      if (value === undefined) return undefined;
      if (value) given[secret.variable] = value;
    }
    if (!modes.length || modes.some((s) => given[s.variable])) return given;
    io.output.write(`  ${platform.init.label} needs ${modes.map((s) => `${s.what} (${s.mode})`).join(' or ')}; give one of them, or press Ctrl-C to stop\n`);
  }
}

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
