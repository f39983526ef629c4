import { createParser } from 'eventsource-parser';
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { Agent, request as httpRequest } from '#src/http/undici.ts';
import { guardedCall } from './stall.ts';
import { ModelError, type ModelClient, type ModelRequest, type ModelResponse, type ToolCall, type ToolSpec, type Usage } from './types.ts';

const DEFAULT_BASE_URL = 'https://api.openai.com/v1';
/** How much of a failed call's answer is read for its message. */
const ERROR_BODY_LIMIT = 64 * 1024;

/**
 * Any OpenAI-compatible chat-completions endpoint: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp ... Spoken to with
 * undici's request and its answer read with eventsource-parser: a turn's call costs about a millisecond of CPU less
 * than through the OpenAI SDK, whose fetch and web streams are most of its cost. The SDK's types describe the wire.
 */
export function createOpenAiClient(options: { baseUrl?: string; apiKey?: string; stallMs?: number }): ModelClient {
  const url = `${(options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '')}/chat/completions`;
  const headers = { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${options.apiKey ?? 'none'}` };
  // Connections are kept for the next call. No timeouts of undici's own: the stall guard gives up a silent call, and
  // retries are decided in one place (withRetries).
  const dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  return {
    provider: 'openai',
    complete: (request, onTextDelta) => guardedCall(request, options.stallMs, (guarded, touch) => streamCompletion({ url, headers, dispatcher }, guarded, onTextDelta, touch)),
  };
}

/** A call the endpoint answered with an error status: what toModelError reads (status, headers, message). */
class StatusError extends Error {
  constructor(
    readonly status: number,
    readonly headers: Record<string, string>,
    message: string,
  ) {
    super(message);
  }
}

async function streamCompletion(
  endpoint: { url: string; headers: Record<string, string>; dispatcher: Agent },
  request: ModelRequest,
  onTextDelta?: (delta: string) => void,
  touch: () => void = () => {},
): Promise<ModelResponse> {
  const head: Pick<ChatCompletionCreateParamsStreaming, 'model'> = { model: request.model };
  const rest: Omit<ChatCompletionCreateParamsStreaming, 'model' | 'tools'> = {
    messages: toOpenAiMessages(request),
    ...(request.tools.length ? { tool_choice: toolChoice(request) } : {}),
    ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
    ...(request.thinking ? { reasoning_effort: 'high' as const } : {}),
    stream: true,
    stream_options: { include_usage: true },
  };
  // Tools before messages, as the prompt is cached, so the request's bytes share their start too. The same body as
  // JSON.stringify gives, with the tools' bytes written once and kept (a turn sends the same tools at every call).
  const body = Buffer.concat([Buffer.from(JSON.stringify(head).slice(0, -1)), toolsBytes(request.tools), Buffer.from(`,${JSON.stringify(rest).slice(1)}`)]);
  const response = await httpRequest(endpoint.url, {
    method: 'POST',
    headers: endpoint.headers,
    body,
    signal: request.signal,
    dispatcher: endpoint.dispatcher,
  }).catch((err: unknown) => {
    throw inWords(err, endpoint.url, request.signal);
  });
  touch();
  if (response.statusCode >= 400) throw await statusError(response);

  let text = '';
  let stopReason: string | undefined;
  const usage: Usage = { input: 0, output: 0 };
  const calls = new Map<number, ToolCall>();
  let failure: Error | undefined;
  const onChunk = (chunk: ChatCompletionChunk & { error?: { message?: string } }) => {
    // An error the endpoint sends as an event once the answer has begun (OpenRouter and vLLM do).
    if (chunk.error) throw new Error(`the model's answer broke off: ${chunk.error.message ?? JSON.stringify(chunk.error)}`);
    if (chunk.usage) {
      usage.input = chunk.usage.prompt_tokens ?? 0;
      usage.output = chunk.usage.completion_tokens ?? 0;
      // Part of prompt_tokens: OpenAI caches long prompts by their prefix on its own.
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens;
      if (cached != null) usage.cacheRead = cached;
    }
    const choice = chunk.choices?.[0];
    if (!choice) return;
    const delta = choice.delta;
    if (delta?.content) {
      text += delta.content;
      onTextDelta?.(delta.content);
    }
    for (const part of delta?.tool_calls ?? []) {
      const call = calls.get(part.index) ?? { id: '', name: '', arguments: '' };
      if (part.id) call.id = part.id;
      if (part.function?.name) call.name += part.function.name;
      if (part.function?.arguments) call.arguments += part.function.arguments;
      calls.set(part.index, call);
    }
    if (choice.finish_reason) stopReason = choice.finish_reason;
  };
  const parser = createParser({
    onEvent: (event) => {
      if (failure || event.data === '[DONE]') return;
      try {
        onChunk(JSON.parse(event.data));
      } catch (err) {
        failure = err instanceof SyntaxError ? new Error(`the model's answer could not be read (${err.message})`) : (err as Error);
      }
    },
  });
  const decoder = new TextDecoder();
  try {
    for await (const piece of response.body) {
      touch();
      parser.feed(decoder.decode(piece as Uint8Array, { stream: true }));
      if (failure) break;
    }
  } catch (err) {
    throw inWords(err, endpoint.url, request.signal);
  }
  if (failure) {
    response.body.destroy();
    throw failure;
  }
  // A stream that ends without saying why was cut off (a proxy or the server closed it): its text is not an answer.
  if (!stopReason) throw new ModelError({ message: 'the answer stopped before its end', kind: 'network' });
  const toolCalls = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([i, c]) => ({ ...c, id: c.id || `call_${i}` }));
  return { text, toolCalls, usage, stopReason };
}

/**
 * A connection that failed, in words (`connection refused by 127.0.0.1:9`) rather than the system's code, which is
 * what the log shows the person who set LLM_BASE_URL. A cancel or a stall stays as it is: the guard reads it.
 */
function inWords(err: unknown, url: string, signal: AbortSignal | undefined): unknown {
  const { code, name } = (err ?? {}) as { code?: string; name?: string };
  if (name === 'AbortError' || signal?.aborted) return err;
  const { host } = new URL(url);
  const said =
    code === 'ECONNREFUSED' ? `connection refused by ${host}`
    : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? `${new URL(url).hostname} could not be found (DNS)`
    : code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE' ? `the connection to ${host} was dropped`
    : code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' ? `connecting to ${host} timed out`
    : code === 'EHOSTUNREACH' || code === 'ENETUNREACH' ? `${host} cannot be reached from here`
    : undefined;
  return said ? new ModelError({ message: said, kind: 'network' }, { cause: err }) : err;
}

/** The endpoint's own words for a failed call: `429 Rate limit reached …`, from its JSON error when it sent one. */
async function statusError(response: Awaited<ReturnType<typeof httpRequest>>): Promise<StatusError> {
  let raw = '';
  const decoder = new TextDecoder();
  for await (const piece of response.body) {
    raw += decoder.decode(piece as Uint8Array, { stream: true });
    if (raw.length > ERROR_BODY_LIMIT) {
      response.body.destroy();
      break;
    }
  }
  let said = raw.trim();
  try {
    const parsed = JSON.parse(raw) as { error?: { message?: string } | string; message?: string };
    const error = parsed.error ?? parsed.message;
    said = typeof error === 'string' ? error : error?.message ?? said;
  } catch {
    // Not JSON: its text as it came.
  }
  const headers = Object.fromEntries(Object.entries(response.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v ?? '')]));
  return new StatusError(response.statusCode, headers, `${response.statusCode} ${said.slice(0, 2000) || 'status code (no body)'}`);
}

/** Each tool's JSON, kept while its parameters object lives (a tool's spec is rebuilt per call, its schema is not). */
const toolTexts = new WeakMap<object, { name: string; description: string; json: string }>();

function toolJson(spec: ToolSpec): string {
  const kept = toolTexts.get(spec.parameters);
  if (kept && kept.name === spec.name && kept.description === spec.description) return kept.json;
  const tool: ChatCompletionTool = { type: 'function', function: { name: spec.name, description: spec.description, parameters: spec.parameters } };
  const json = JSON.stringify(tool);
  toolTexts.set(spec.parameters, { name: spec.name, description: spec.description, json });
  return json;
}

/** The bytes of the last few tool lists sent, most recent first (each persona sends one list, the same at every call). */
const toolLists: { texts: string[]; bytes: Buffer }[] = [];
const TOOL_LISTS_KEPT = 8;

/** `,"tools":[…]` as bytes, or nothing when the request has no tools. */
function toolsBytes(tools: ToolSpec[]): Buffer {
  if (!tools.length) return Buffer.alloc(0);
  const texts = tools.map(toolJson);
  const at = toolLists.findIndex((kept) => kept.texts.length === texts.length && kept.texts.every((text, i) => text === texts[i]));
  const list = at >= 0 ? toolLists.splice(at, 1)[0] : { texts, bytes: Buffer.from(`,"tools":[${texts.join(',')}]`) };
  toolLists.unshift(list);
  toolLists.length = Math.min(toolLists.length, TOOL_LISTS_KEPT);
  return list.bytes;
}

function toolChoice(request: ModelRequest) {
  const choice = request.toolChoice ?? 'auto';
  return typeof choice === 'string' ? choice : { type: 'function' as const, function: { name: choice.name } };
}

function toOpenAiMessages(request: ModelRequest): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [{ role: 'system', content: request.system }];
  for (const m of request.messages) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content });
    else if (m.role === 'tool') out.push({ role: 'tool', tool_call_id: m.toolCallId, content: m.content });
    else
      out.push({
        role: 'assistant',
        content: m.content || (m.toolCalls?.length ? null : ''),
        ...(m.toolCalls?.length
          ? {
              tool_calls: m.toolCalls.map((c) => ({
                id: c.id,
                type: 'function' as const,
                function: { name: c.name, arguments: c.arguments },
              })),
            }
          : {}),
      });
  }
  return out;
}
