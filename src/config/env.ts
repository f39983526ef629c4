import fs from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import type { ConnectorEntry, SettingsReader } from '#src/connector.ts';
import type { EmbeddingSettings } from '#src/memory/embeddings.ts';
import { ConfigError } from './errors.ts';

export type LlmProvider = 'openai' | 'anthropic';

/** The search backends web_search can use, in the order one is picked when several are configured. */
export const WEB_SEARCH_PROVIDERS = ['searxng', 'brave', 'tavily'] as const;
export type WebSearchProviderName = (typeof WEB_SEARCH_PROVIDERS)[number];

export interface WebSearchSettings {
  provider: WebSearchProviderName;
  /** SearXNG's base URL; Brave's or Tavily's endpoint (their public API unless overridden). */
  url: string;
  apiKey?: string;
}

export interface LlmSettings {
  provider: LlmProvider;
  baseUrl?: string;
  apiKey?: string;
  model: string;
  /** How long failing model calls (429/5xx/network) are retried before the turn fails. */
  retryDeadlineMs: number;
  /** How long a model call may send nothing before it is given up (and retried). */
  stallMs: number;
}

export interface Settings {
  databaseUrl?: string;
  home: string;
  personasDir: string;
  /** Custom tool folders every persona has (PARLOR_TOOLS_DIR); each persona also has its own `tools/` folder. */
  toolsDir?: string;
  llm?: LlmSettings;
  http: { port: number; host: string; apiToken?: string };
  timezone: string;
  logLevel: string;
  /** PARLOR_LOG_FILE: logs go to this file (JSON lines) instead of the terminal. */
  logFile?: string;
  /** web_search's backend; absent when none is configured (the tool is then not offered). */
  webSearch?: WebSearchSettings;
  /** The embedding endpoint recall ranks by meaning with; absent when none is configured (recall ranks by text). */
  embeddings?: EmbeddingSettings;
  /** Platform settings by connector id, as each registry entry parsed them; a connector starts when it has some. */
  connectors: Record<string, unknown>;
  /** PARLOR_TURN_CONCURRENCY: how many turns one process runs at once (each in a conversation of its own). */
  turnConcurrency?: number;
  /**
   * PARLOR_HUNG_AFTER_SECONDS: how long a process may go without its heartbeat, its connections still open, before the
   * others fence it and take its work over.
   */
  hungAfterSeconds?: number;
}

const NO_MODEL =
  'no model configured. Set LLM_MODEL and its endpoint, in the environment or in .env, for example:\n' +
  '  LLM_PROVIDER=openai LLM_BASE_URL=http://localhost:11434/v1 LLM_MODEL=llama3.1        (Ollama, vLLM, llama.cpp, OpenRouter ...)\n' +
  '  LLM_PROVIDER=openai LLM_API_KEY=sk-... LLM_MODEL=gpt-4.1-mini                        (OpenAI)\n' +
  '  LLM_PROVIDER=anthropic LLM_API_KEY=sk-ant-... LLM_MODEL=claude-sonnet-4-5              (Anthropic)';

/** Reads `.env` from the working directory into `env` without overriding what is already set. */
export function loadDotEnv(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): void {
  const file = path.join(cwd, '.env');
  if (!fs.existsSync(file)) return;
  let parsed: Record<string, string>;
  try {
    parsed = parseEnvText(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`${file}: cannot be read (${(err as Error).message})`);
  }
  for (const [key, value] of Object.entries(parsed)) if (env[key] === undefined) env[key] = value;
}

export function parseEnvText(text: string): Record<string, string> {
  // Node's own dotenv parser (Node ≥ 20.12).
  return parseEnv(text) as Record<string, string>;
}

function optional(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/** Several settings pasted on one line: `LLM_PROVIDER=openai LLM_BASE_URL=...` reads as one long value. */
function pastedTogether(value: string): string {
  return /\s[A-Z][A-Z0-9_]*=/.test(value) ? ' (it looks like several settings on one line; put each NAME=value on a line of its own)' : '';
}

function url(env: NodeJS.ProcessEnv, name: string, protocols: string[], example?: string): string | undefined {
  const value = optional(env, name);
  if (value === undefined) return undefined;
  // A database URL may hold a password, so it is not repeated; the others are quoted as written.
  const shown = name === 'DATABASE_URL' ? name : `${name}=${value}`;
  example ??= `${protocols[0]}//localhost:${name === 'DATABASE_URL' ? '5432/parlor' : '11434/v1'}`;
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  // `localhost:11434/v1` parses, with "localhost:" as its scheme.
  const schemeless = !/^[a-z][a-z0-9+.-]*:\/\//i.test(value);
  if (!parsed || (schemeless && !protocols.includes(parsed.protocol))) {
    throw new ConfigError(
      `${shown} is not a URL: it needs ${protocols.map((p) => `${p}//`).join(' or ')} in front, e.g. ${example}` +
        (name === 'DATABASE_URL' ? ' (percent-encode special characters in a password)' : pastedTogether(value)),
    );
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${shown} must start with ${protocols.map((p) => `${p}//`).join(' or ')}, not ${parsed.protocol}//`);
  }
  return value.replace(/\/+$/, '');
}

/** The environment as connectors read it (see ConnectorEntry.parse). */
export function settingsReader(env: NodeJS.ProcessEnv): SettingsReader {
  return { optional: (name) => optional(env, name), url: (name, protocols) => url(env, name, protocols) };
}

/** Parlor's settings from the environment; `entries` are the connectors whose settings it reads too. */
export function parseSettings(
  env: NodeJS.ProcessEnv,
  cwd = process.cwd(),
  entries: readonly Pick<ConnectorEntry, 'id' | 'parse'>[] = [],
): Settings {
  const providerText = optional(env, 'LLM_PROVIDER') ?? 'openai';
  const provider = providerText.toLowerCase();
  if (provider !== 'openai' && provider !== 'anthropic') {
    throw new ConfigError(
      `LLM_PROVIDER=${providerText} is not supported; use openai (any OpenAI-compatible endpoint) or anthropic${pastedTogether(providerText)}`,
    );
  }
  const model = optional(env, 'LLM_MODEL');
  const baseUrl = url(env, 'LLM_BASE_URL', ['http:', 'https:']);
  const apiKey = optional(env, 'LLM_API_KEY');
  let llm: LlmSettings | undefined;
  if (model) {
    if (!apiKey && (provider === 'anthropic' || !baseUrl)) {
      throw new ConfigError(
        `LLM_API_KEY is not set; ${provider === 'anthropic' ? 'Anthropic' : 'OpenAI'} needs an API key ` +
          '(for a local OpenAI-compatible server set LLM_BASE_URL instead, e.g. http://localhost:11434/v1)',
      );
    }
    const retryText = optional(env, 'LLM_RETRY_SECONDS') ?? '90';
    if (!/^\d+$/.test(retryText)) throw new ConfigError(`LLM_RETRY_SECONDS=${retryText} is not a whole number of seconds`);
    const stallText = optional(env, 'LLM_STALL_SECONDS') ?? '180';
    if (!/^\d+$/.test(stallText) || Number(stallText) < 1) throw new ConfigError(`LLM_STALL_SECONDS=${stallText} is not a whole number of seconds (1 or more)`);
    llm = { provider, model, baseUrl, apiKey, retryDeadlineMs: Number(retryText) * 1000, stallMs: Number(stallText) * 1000 };
  } else if (optional(env, 'LLM_BASE_URL') || optional(env, 'LLM_API_KEY')) {
    throw new ConfigError('LLM_MODEL is not set; name the model to use, e.g. LLM_MODEL=gpt-4.1-mini or LLM_MODEL=llama3.1');
  }

  const portText = optional(env, 'PARLOR_HTTP_PORT') ?? '8787';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) {
    throw new ConfigError(`PARLOR_HTTP_PORT=${portText} is not a port number (0-65535)`);
  }

  const turnsText = optional(env, 'PARLOR_TURN_CONCURRENCY');
  if (turnsText !== undefined && (!/^\d+$/.test(turnsText) || Number(turnsText) < 1 || Number(turnsText) > 1000)) {
    throw new ConfigError(`PARLOR_TURN_CONCURRENCY=${turnsText} is not a whole number from 1 to 1000 (turns one process runs at once)`);
  }

  const hungText = optional(env, 'PARLOR_HUNG_AFTER_SECONDS');
  if (hungText !== undefined && (!/^\d+$/.test(hungText) || Number(hungText) < 5 || Number(hungText) > 3600)) {
    throw new ConfigError(
      `PARLOR_HUNG_AFTER_SECONDS=${hungText} is not a whole number from 5 to 3600 (seconds a process may go without its heartbeat before the others take its work over)`,
    );
  }

  const timezone = optional(env, 'PARLOR_TIMEZONE') ?? 'UTC';
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
  } catch {
    throw new ConfigError(`PARLOR_TIMEZONE=${timezone} is not a time zone; use an IANA name such as Europe/Berlin or UTC`);
  }

  const logLevelText = optional(env, 'LOG_LEVEL') ?? 'info';
  const logLevel = logLevelText.toLowerCase();
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (!levels.includes(logLevel)) throw new ConfigError(`LOG_LEVEL=${logLevelText} is not one of ${levels.join(', ')}`);

  const connectors: Settings['connectors'] = {};
  const read = settingsReader(env);
  for (const entry of entries) {
    const parsed = entry.parse(read);
    if (parsed !== undefined) connectors[entry.id] = parsed;
  }

  return {
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    home: path.resolve(cwd, optional(env, 'PARLOR_HOME') ?? '.parlor'),
    personasDir: path.resolve(cwd, optional(env, 'PARLOR_PERSONAS_DIR') ?? 'personas'),
    ...(optional(env, 'PARLOR_TOOLS_DIR') ? { toolsDir: path.resolve(cwd, optional(env, 'PARLOR_TOOLS_DIR')!) } : {}),
    llm,
    http: { port, host: optional(env, 'PARLOR_HTTP_HOST') ?? '127.0.0.1', apiToken: apiToken(env) },
    timezone,
    logLevel,
    logFile: optional(env, 'PARLOR_LOG_FILE') ? path.resolve(cwd, optional(env, 'PARLOR_LOG_FILE')!) : undefined,
    webSearch: webSearch(env),
    embeddings: embeddings(env),
    connectors,
    ...(turnsText !== undefined ? { turnConcurrency: Number(turnsText) } : {}),
    ...(hungText !== undefined ? { hungAfterSeconds: Number(hungText) } : {}),
  };
}

const SEARCH_DEFAULT_URLS = { brave: 'https://api.search.brave.com/res/v1/web/search', tavily: 'https://api.tavily.com/search' };

/**
 * web_search's backend: the one WEB_SEARCH_PROVIDER names (`none` turns search off), else the first configured of
 * SearXNG (SEARXNG_URL), Brave (BRAVE_SEARCH_API_KEY), Tavily (TAVILY_API_KEY).
 */
function webSearch(env: NodeJS.ProcessEnv): WebSearchSettings | undefined {
  const http = ['http:', 'https:'];
  const searxng = url(env, 'SEARXNG_URL', http, 'http://localhost:8888');
  const braveKey = optional(env, 'BRAVE_SEARCH_API_KEY');
  const braveUrl = url(env, 'BRAVE_SEARCH_URL', http, SEARCH_DEFAULT_URLS.brave);
  const tavilyKey = optional(env, 'TAVILY_API_KEY');
  const tavilyUrl = url(env, 'TAVILY_URL', http, SEARCH_DEFAULT_URLS.tavily);
  if (braveUrl && !braveKey) throw new ConfigError('BRAVE_SEARCH_URL is set but BRAVE_SEARCH_API_KEY is not; Brave Search needs its API key');
  if (tavilyUrl && !tavilyKey) throw new ConfigError('TAVILY_URL is set but TAVILY_API_KEY is not; Tavily needs its API key');
  const configured: Partial<Record<WebSearchProviderName, WebSearchSettings>> = {
    searxng: searxng ? { provider: 'searxng', url: searxng } : undefined,
    brave: braveKey ? { provider: 'brave', url: braveUrl ?? SEARCH_DEFAULT_URLS.brave, apiKey: braveKey } : undefined,
    tavily: tavilyKey ? { provider: 'tavily', url: tavilyUrl ?? SEARCH_DEFAULT_URLS.tavily, apiKey: tavilyKey } : undefined,
  };
  const chosenText = optional(env, 'WEB_SEARCH_PROVIDER');
  if (chosenText === undefined) return WEB_SEARCH_PROVIDERS.map((name) => configured[name]).find(Boolean);
  const chosen = chosenText.toLowerCase();
  if (chosen === 'none') return undefined;
  if (!(WEB_SEARCH_PROVIDERS as readonly string[]).includes(chosen)) {
    throw new ConfigError(`WEB_SEARCH_PROVIDER=${chosenText} is not supported; use ${WEB_SEARCH_PROVIDERS.join(', ')} or none${pastedTogether(chosenText)}`);
  }
  const settings = configured[chosen as WebSearchProviderName];
  if (!settings) {
    const needs = { searxng: 'SEARXNG_URL (e.g. http://localhost:8888)', brave: 'BRAVE_SEARCH_API_KEY', tavily: 'TAVILY_API_KEY' }[chosen as WebSearchProviderName];
    throw new ConfigError(`WEB_SEARCH_PROVIDER=${chosenText} needs ${needs}, which is not set`);
  }
  return settings;
}

/** EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL (both, or neither), and EMBEDDINGS_API_KEY when the endpoint wants one. */
function embeddings(env: NodeJS.ProcessEnv): EmbeddingSettings | undefined {
  const baseUrl = url(env, 'EMBEDDINGS_BASE_URL', ['http:', 'https:'], 'http://localhost:11434/v1');
  const model = optional(env, 'EMBEDDINGS_MODEL');
  const apiKey = optional(env, 'EMBEDDINGS_API_KEY');
  if (!baseUrl && !model) {
    if (apiKey) throw new ConfigError('EMBEDDINGS_API_KEY is set but EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL are not; name the endpoint and model, e.g. EMBEDDINGS_BASE_URL=https://api.openai.com/v1 EMBEDDINGS_MODEL=text-embedding-3-small');
    return undefined;
  }
  if (!baseUrl) throw new ConfigError('EMBEDDINGS_MODEL is set but EMBEDDINGS_BASE_URL is not; set the endpoint, e.g. EMBEDDINGS_BASE_URL=http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1');
  if (!model) throw new ConfigError('EMBEDDINGS_BASE_URL is set but EMBEDDINGS_MODEL is not; name the model, e.g. EMBEDDINGS_MODEL=nomic-embed-text or text-embedding-3-small');
  return { baseUrl, model, apiKey };
}

/** The model settings, or the one message that says how to configure them. */
export function requireModel(settings: Settings): LlmSettings {
  if (!settings.llm) throw new ConfigError(NO_MODEL);
  return settings.llm;
}

/** The API's bearer token: the characters an Authorization header can carry (RFC 6750), at least 16 of them. */
function apiToken(env: Record<string, string | undefined>): string | undefined {
  const token = optional(env, 'PARLOR_API_TOKEN');
  if (token === undefined) return undefined;
  if (!/^[A-Za-z0-9._~+/-]+=*$/.test(token)) {
    throw new ConfigError('PARLOR_API_TOKEN may hold only letters, digits and . _ ~ + / - (e.g. the output of `openssl rand -hex 32`)');
  }
  if (token.length < 16) throw new ConfigError('PARLOR_API_TOKEN is too short; use at least 16 characters (e.g. `openssl rand -hex 32`)');
  return token;
}

/** Every secret value in the settings, so tool output can be scrubbed of them; `entries` name the connectors'. */
export function settingSecrets(settings: Settings, entries: readonly Pick<ConnectorEntry, 'id' | 'secrets'>[] = []): string[] {
  const connectorSecrets = entries.flatMap((entry) => (settings.connectors[entry.id] === undefined ? [] : entry.secrets(settings.connectors[entry.id])));
  const password = (address: string | undefined) => {
    try {
      return address ? decodeURIComponent(new URL(address).password) : '';
    } catch {
      return '';
    }
  };
  return [
    settings.llm?.apiKey,
    settings.http.apiToken,
    ...connectorSecrets,
    password(settings.databaseUrl),
    settings.webSearch?.apiKey,
    settings.embeddings?.apiKey,
    password(settings.embeddings?.baseUrl),
    // A SearXNG behind a proxy may take a password in its URL.
    password(settings.webSearch?.url),
  ].filter((v): v is string => typeof v === 'string' && v.length > 0);
}
