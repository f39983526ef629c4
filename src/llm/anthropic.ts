import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlockParam, Message, MessageParam, Tool, ToolChoice as AnthropicToolChoice } from '@anthropic-ai/sdk/resources/messages';
import { guardedCall } from './stall.ts';
import { ModelError, type ModelClient, type ModelRequest, type ModelResponse, type ToolCall, type Usage } from './types.ts';

export function createAnthropicClient(options: { baseUrl?: string; apiKey?: string; stallMs?: number }): ModelClient {
  const client = new Anthropic({ baseURL: options.baseUrl, apiKey: options.apiKey, maxRetries: 0, timeout: 600_000 });
  return {
    provider: 'anthropic',
    complete: (request, onTextDelta) => guardedCall(request, options.stallMs, (guarded, touch) => streamMessage(client, guarded, onTextDelta, touch)),
  };
}

const THINKING_BUDGET = 4096;

async function streamMessage(
  client: Anthropic,
  request: ModelRequest,
  onTextDelta?: (delta: string) => void,
  touch: () => void = () => {},
): Promise<ModelResponse> {
  const tools: Tool[] = request.tools.map((t) => ({
    name: t.name,
    description: t.description,
    input_schema: t.parameters as Tool['input_schema'],
  }));
  // Extended thinking cannot be combined with a forced tool choice.
  const thinking = request.thinking && !(request.toolChoice && request.toolChoice !== 'auto');
  const maxTokens = Math.max(request.maxTokens ?? 8192, thinking ? THINKING_BUDGET + 2048 : 0);
  // In the order the prompt is cached (tools, system, messages), so the request's bytes share their start too.
  const stream = client.messages.stream(
    {
      model: request.model,
      ...(tools.length ? { tools } : {}),
      // The system prompt is the same all day: it and the tools are read from the cache on every call.
      system: [{ type: 'text', text: request.system, cache_control: { type: 'ephemeral' } }],
      messages: toAnthropicMessages(request),
      ...(tools.length ? { tool_choice: toolChoice(request) } : {}),
      max_tokens: maxTokens,
      ...(thinking ? { thinking: { type: 'enabled' as const, budget_tokens: THINKING_BUDGET } } : {}),
    },
    { signal: request.signal },
  );
  // Every event counts as a sign of life, pings while the model thinks included.
  stream.on('connect', touch);
  stream.on('streamEvent', touch);
  if (onTextDelta) stream.on('text', (delta) => onTextDelta(delta));
  const message = await stream.finalMessage();
  // A stream that ends without saying why was cut off (a proxy or the server closed it): its text is not an answer.
  if (!message.stop_reason) throw new ModelError({ message: 'the answer stopped before its end', kind: 'network' });
  let text = '';
  const toolCalls: ToolCall[] = [];
  for (const block of message.content) {
    if (block.type === 'text') text += block.text;
    else if (block.type === 'tool_use') toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
  }
  return {
    text,
    toolCalls,
    usage: usageOf(message.usage),
    stopReason: message.stop_reason ?? 'end_turn',
  };
}

function toolChoice(request: ModelRequest): AnthropicToolChoice {
  const choice = request.toolChoice ?? 'auto';
  if (choice === 'auto') return { type: 'auto' };
  if (choice === 'required') return { type: 'any' };
  return { type: 'tool', name: choice.name };
}

/** Anthropic counts cached input apart from the rest; Usage.input is all of it. */
function usageOf(usage: Message['usage']): Usage {
  const cacheRead = usage.cache_read_input_tokens ?? 0;
  const cacheWrite = usage.cache_creation_input_tokens ?? 0;
  return {
    input: (usage.input_tokens ?? 0) + cacheRead + cacheWrite,
    output: usage.output_tokens ?? 0,
    ...(usage.cache_read_input_tokens != null ? { cacheRead } : {}),
    ...(usage.cache_creation_input_tokens != null ? { cacheWrite } : {}),
  };
}

/**
 * Anthropic wants alternating roles: consecutive tool results join one user message, as do adjacent user texts. The
 * last message the previous request also began with carries a cache breakpoint: what comes before it is read from
 * the cache, and the next request reads this one's.
 */
function toAnthropicMessages(request: ModelRequest): MessageParam[] {
  const out: MessageParam[] = [];
  let marked = false;
  const push = (role: 'user' | 'assistant', blocks: ContentBlockParam[]) => {
    const last = out[out.length - 1];
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else out.push({ role, content: [...blocks] });
  };
  const markLast = () => {
    const block = (out.at(-1)?.content as ContentBlockParam[] | undefined)?.at(-1);
    if (block && block.type !== 'thinking' && block.type !== 'redacted_thinking') {
      block.cache_control = { type: 'ephemeral' };
      marked = true;
    }
  };
  for (const [i, m] of request.messages.entries()) {
    if (request.stablePrefix && i === request.stablePrefix && !marked) markLast();
    if (m.role === 'user') push('user', [{ type: 'text', text: m.content || '(empty message)' }]);
    else if (m.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: m.toolCallId, content: m.content }]);
    else {
      const blocks: ContentBlockParam[] = [];
      if (m.content) blocks.push({ type: 'text', text: m.content });
      for (const c of m.toolCalls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: safeJson(c.arguments) });
      if (blocks.length) push('assistant', blocks);
    }
  }
  if (request.stablePrefix && request.stablePrefix >= request.messages.length && !marked) markLast();
  if (out[0]?.role === 'assistant') out.unshift({ role: 'user', content: [{ type: 'text', text: '(conversation continues)' }] });
  return out;
}

function safeJson(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text || '{}');
    return value && typeof value === 'object' && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}
