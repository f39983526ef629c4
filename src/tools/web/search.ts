import type { Settings, WebSearchProviderName } from '#src/config/env.ts';
import { withDeadline } from '#src/abort.ts';
import { withRetries } from '#src/retry.ts';

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

/** A web search backend: the results for a query, best first, at most `count` of them. Throws SearchFailed. */
export interface SearchProvider {
  /** Shown to the model and in errors (`Brave Search`). */
  name: string;
  search(query: string, count: number, signal: AbortSignal): Promise<SearchResult[]>;
}

const MAX_RETRY_AFTER_MS = 5_000;

/** A search that gave no results: which provider, what went wrong, and whether trying again may help. */
export class SearchFailed extends Error {
  readonly retryable: boolean;
  constructor(
    readonly provider: string,
    readonly kind: 'status' | 'timeout' | 'network' | 'format',
    message: string,
    readonly status?: number,
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'SearchFailed';
    // One that asks for a long wait is not waited for: the model hears it and may try later.
    const worthWaiting = retryAfterMs === undefined || retryAfterMs <= MAX_RETRY_AFTER_MS;
    this.retryable = worthWaiting && (kind === 'network' || status === 429 || (status !== undefined && status >= 500));
  }
}

export interface ProviderOptions {
  /** One attempt's time limit (default 10 s). */
  timeoutMs?: number;
  /** The wait before the one retry of a 429 or 5xx (default 500 ms; a Retry-After up to 5 s is honoured). */
  retryDelayMs?: number;
}

interface Endpoint {
  name: string;
  /** The environment variable holding the key, named when the key is refused. */
  keyVariable?: string;
  request(query: string, count: number): { url: string; init: RequestInit };
  results(body: unknown): unknown[] | undefined;
}

function provider(endpoint: Endpoint, options: ProviderOptions): SearchProvider {
  const timeoutMs = options.timeoutMs ?? 10_000;
  return {
    name: endpoint.name,
    search: (query, count, signal) =>
      withRetries(
        async () => {
          const { url, init } = endpoint.request(query, count);
          const body = await withDeadline(timeoutMs, signal, (attempt) => getJson(endpoint, url, init, attempt, timeoutMs, signal));
          const items = endpoint.results(body);
          if (!Array.isArray(items)) throw new SearchFailed(endpoint.name, 'format', `${endpoint.name} answered with no list of results`);
          return items.map(toResult).filter((r): r is SearchResult => r !== undefined).slice(0, count);
        },
        { deadlineMs: MAX_RETRY_AFTER_MS + timeoutMs, retries: 1, minDelayMs: options.retryDelayMs ?? 500, maxDelayMs: MAX_RETRY_AFTER_MS, signal },
      ),
  };
}

async function getJson(endpoint: Endpoint, url: string, init: RequestInit, signal: AbortSignal, timeoutMs: number, callerSignal: AbortSignal): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, signal, headers: { accept: 'application/json', 'user-agent': 'Parlor/1 (web_search)', ...init.headers } });
  } catch (err) {
    if (signal.aborted && !callerSignal.aborted) {
      throw new SearchFailed(endpoint.name, 'timeout', `${endpoint.name} did not answer within ${timeoutMs / 1000} s`, undefined, undefined, { cause: err });
    }
    const code = (err as { cause?: { code?: string } }).cause?.code;
    const why = code === 'ECONNREFUSED' ? 'the connection was refused' : code === 'ENOTFOUND' ? 'its host name could not be resolved' : 'the request failed';
    throw new SearchFailed(endpoint.name, 'network', `${endpoint.name} could not be reached (${why})`, undefined, undefined, { cause: err });
  }
  if (!response.ok) {
    await response.body?.cancel();
    const seconds = Number(response.headers.get('retry-after'));
    const retryAfterMs = response.headers.has('retry-after') && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
    throw new SearchFailed(endpoint.name, 'status', `${endpoint.name} answered ${response.status}${statusHint(endpoint, response.status)}`, response.status, retryAfterMs);
  }
  try {
    return await response.json();
  } catch (err) {
    throw new SearchFailed(endpoint.name, 'format', `${endpoint.name} answered with something that is not JSON`, undefined, undefined, { cause: err });
  }
}

function statusHint(endpoint: Endpoint, status: number): string {
  if ((status === 401 || status === 403) && endpoint.keyVariable) return ` (the API key was refused; check ${endpoint.keyVariable})`;
  if (status === 403) return " (SearXNG answers JSON only when its settings.yml lists json under search.formats)";
  if (status === 429) return ' (too many searches; try again later)';
  if (status >= 500) return ' (the search service has a problem; try again later)';
  return '';
}

/** One result, whatever the backend called its fields; undefined without an http(s) address. */
function toResult(item: unknown): SearchResult | undefined {
  if (!item || typeof item !== 'object') return undefined;
  const r = item as Record<string, unknown>;
  const text = (...values: unknown[]) => values.find((v): v is string => typeof v === 'string' && v.trim() !== '') ?? '';
  const url = text(r.url, r.link, r.href).trim();
  if (!/^https?:\/\//i.test(url)) return undefined;
  return { title: text(r.title, r.name) || url, url, snippet: text(r.content, r.description, r.snippet) };
}

/** SearXNG's JSON API (`/search?format=json`); its settings.yml must allow the json format. */
export function createSearxngProvider(settings: { url: string }, options: ProviderOptions = {}): SearchProvider {
  return provider(
    {
      name: 'SearXNG',
      request: (query) => ({ url: `${settings.url.replace(/\/+$/, '')}/search?${new URLSearchParams({ q: query, format: 'json', pageno: '1' })}`, init: {} }),
      results: (body) => (body as { results?: unknown[] } | null)?.results,
    },
    options,
  );
}

/** The Brave Search API's web search. */
export function createBraveProvider(settings: { url: string; apiKey: string }, options: ProviderOptions = {}): SearchProvider {
  return provider(
    {
      name: 'Brave Search',
      keyVariable: 'BRAVE_SEARCH_API_KEY',
      request: (query, count) => ({
        url: `${settings.url}?${new URLSearchParams({ q: query, count: String(Math.min(count, 20)) })}`,
        init: { headers: { 'x-subscription-token': settings.apiKey } },
      }),
      // No `web` section at all is how Brave says it found nothing.
      results: (body) => (body as { web?: { results?: unknown[] } } | null)?.web?.results ?? (body && typeof body === 'object' ? [] : undefined),
    },
    options,
  );
}

/** Tavily's search API. */
export function createTavilyProvider(settings: { url: string; apiKey: string }, options: ProviderOptions = {}): SearchProvider {
  return provider(
    {
      name: 'Tavily',
      keyVariable: 'TAVILY_API_KEY',
      request: (query, count) => ({
        url: settings.url,
        init: {
          method: 'POST',
          headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ query, max_results: count, search_depth: 'basic' }),
        },
      }),
      results: (body) => (body as { results?: unknown[] } | null)?.results,
    },
    options,
  );
}

const FACTORIES: Record<WebSearchProviderName, (s: NonNullable<Settings['webSearch']>, o: ProviderOptions) => SearchProvider> = {
  searxng: (s, o) => createSearxngProvider(s, o),
  brave: (s, o) => createBraveProvider({ url: s.url, apiKey: s.apiKey ?? '' }, o),
  tavily: (s, o) => createTavilyProvider({ url: s.url, apiKey: s.apiKey ?? '' }, o),
};

/** The search backend the settings configure, or undefined (web_search is then not offered). */
export function searchProviderFromSettings(settings: Pick<Settings, 'webSearch'>, options: ProviderOptions = {}): SearchProvider | undefined {
  return settings.webSearch && FACTORIES[settings.webSearch.provider](settings.webSearch, options);
}
