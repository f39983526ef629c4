import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { guardedCall } from './stall.ts';
import { ModelError, type ModelClient, type ModelRequest, type ModelResponse, type ToolCall, type Usage } from './types.ts';

/** Any OpenAI-compatible chat-completions endpoint: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp ... */
export function createOpenAiClient(options: { baseUrl?: string; apiKey?: string; stallMs?: number }): ModelClient {
  // Retries are decided in one place (withRetries), so the SDK's own are off.
  const client = new OpenAI({ baseURL: options.baseUrl, apiKey: options.apiKey ?? 'none', maxRetries: 0, timeout: 600_000 });
  return {
    provider: 'openai',
    complete: (request, onTextDelta) => guardedCall(request, options.stallMs, (guarded, touch) => streamCompletion(client, guarded, onTextDelta, touch)),
  };
}

async function streamCompletion(
  client: OpenAI,
  request: ModelRequest,
  onTextDelta?: (delta: string) => void,
  touch: () => void = () => {},
): Promise<ModelResponse> {
  const tools: ChatCompletionTool[] = request.tools.map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  const stream = await client.chat.completions.create(
    {
      model: request.model,
      // Tools before messages, as the prompt is cached, so the request's bytes share their start too.
      ...(tools.length ? { tools } : {}),
      messages: toOpenAiMessages(request),
      ...(tools.length ? { tool_choice: toolChoice(request) } : {}),
      ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
      ...(request.thinking ? { reasoning_effort: 'high' as const } : {}),
      stream: true,
      stream_options: { include_usage: true },
    },
    { signal: request.signal },
  );
  let text = '';
  let stopReason: string | undefined;
  const usage: Usage = { input: 0, output: 0 };
  const calls = new Map<number, ToolCall>();
  for await (const chunk of stream) {
    touch();
    if (chunk.usage) {
      usage.input = chunk.usage.prompt_tokens ?? 0;
      usage.output = chunk.usage.completion_tokens ?? 0;
      // Part of prompt_tokens: OpenAI caches long prompts by their prefix on its own.
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens;
      if (cached != null) usage.cacheRead = cached;
    }
    const choice = chunk.choices?.[0];
    if (!choice) continue;
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
  }
  // A stream that ends without saying why was cut off (a proxy or the server closed it): its text is not an answer.
  if (!stopReason) throw new ModelError({ message: 'the answer stopped before its end', kind: 'network' });
  const toolCalls = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([i, c]) => ({ ...c, id: c.id || `call_${i}` }));
  return { text, toolCalls, usage, stopReason };
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
