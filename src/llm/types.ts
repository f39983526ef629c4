// Messages are plain data: stored as jsonb, replayed to any provider.

export interface ToolCall {
  id: string;
  name: string;
  /** The raw JSON text the model produced; it may be malformed. */
  arguments: string;
}

export type ChatMessage =
  /** `attachments` records what arrived with the message (type, name, size, file id, saved path); providers ignore it. */
  | { role: 'user'; content: string; attachments?: { type: string; name?: string; size?: number; fileId?: string; path?: string }[] }
  /** `usage` records what the call that produced this message cost; providers ignore it. */
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[]; usage?: Usage }
  | { role: 'tool'; toolCallId: string; name: string; content: string };

export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export type ToolChoice = 'auto' | 'required' | { name: string };

export interface ModelRequest {
  model: string;
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  toolChoice?: ToolChoice;
  thinking?: boolean;
  maxTokens?: number;
  /**
   * The first this many messages are the ones the previous request of this conversation began with, unchanged: a
   * provider that caches prompts at marked points (Anthropic) marks the last of them.
   */
  stablePrefix?: number;
  signal?: AbortSignal;
}

export interface Usage {
  /** Every input token, cached or not. */
  input: number;
  output: number;
  /** Of the input, how many tokens were read from the provider's prompt cache (when it says). */
  cacheRead?: number;
  /** Of the input, how many tokens were written to the prompt cache (Anthropic). */
  cacheWrite?: number;
}

/** Adds one call's usage to a running total; the cache counts appear once a call reports them. */
export function addUsage(total: Usage, more: Usage): void {
  total.input += more.input;
  total.output += more.output;
  if (more.cacheRead !== undefined) total.cacheRead = (total.cacheRead ?? 0) + more.cacheRead;
  if (more.cacheWrite !== undefined) total.cacheWrite = (total.cacheWrite ?? 0) + more.cacheWrite;
}

export interface ModelResponse {
  text: string;
  toolCalls: ToolCall[];
  usage: Usage;
  stopReason: string;
}

/** One streaming model call. Provider failures are thrown as ModelError; the caller retries. */
export interface ModelClient {
  readonly provider: string;
  complete(request: ModelRequest, onTextDelta?: (delta: string) => void): Promise<ModelResponse>;
}

/** A provider failure. `retryable` covers 429, 5xx (and 529) and network errors. */
export class ModelError extends Error {
  override name = 'ModelError';
  readonly status?: number;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly kind: 'rate_limited' | 'server' | 'network' | 'auth' | 'request' | 'aborted';

  constructor(
    fields: { message: string; status?: number; retryAfterMs?: number; kind: ModelError['kind'] },
    options?: { cause?: unknown },
  ) {
    super(fields.message, options);
    this.status = fields.status;
    this.kind = fields.kind;
    this.retryAfterMs = fields.retryAfterMs;
    this.retryable = fields.kind === 'rate_limited' || fields.kind === 'server' || fields.kind === 'network';
  }
}

/** Maps an SDK error (both SDKs share the shape: status, headers) to a ModelError. */
export function toModelError(err: unknown, signal?: AbortSignal): ModelError {
  if (err instanceof ModelError) return err;
  const e = err as { status?: number; headers?: Headers | Record<string, string>; message?: string; name?: string };
  if (signal?.aborted || e?.name === 'AbortError' || e?.name === 'APIUserAbortError') {
    return new ModelError({ message: 'the model call was cancelled', kind: 'aborted' }, { cause: err });
  }
  const status = typeof e?.status === 'number' ? e.status : undefined;
  const message = e?.message ?? String(err);
  if (status === undefined) return new ModelError({ message, kind: 'network' }, { cause: err });
  const retryAfterMs = parseRetryAfter(header(e.headers, 'retry-after-ms'), header(e.headers, 'retry-after'));
  const kind = status === 429 ? 'rate_limited' : status >= 500 ? 'server' : status === 401 || status === 403 ? 'auth' : 'request';
  return new ModelError({ message, status, kind, retryAfterMs }, { cause: err });
}

function header(headers: Headers | Record<string, string> | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  return (headers as Record<string, string>)[name];
}

function parseRetryAfter(ms: string | undefined, seconds: string | undefined): number | undefined {
  if (ms && Number.isFinite(Number(ms))) return Number(ms);
  if (!seconds) return undefined;
  if (Number.isFinite(Number(seconds))) return Number(seconds) * 1000;
  const date = Date.parse(seconds);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
