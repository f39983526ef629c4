import type { LlmSettings } from '#src/config/env.ts';
import { withRetries } from '#src/retry.ts';
import { createAnthropicClient } from './anthropic.ts';
import { createOpenAiClient } from './openai.ts';
import type { ModelClient } from './types.ts';

export function createModelClient(settings: LlmSettings): ModelClient {
  return settings.provider === 'anthropic'
    ? createAnthropicClient({ baseUrl: settings.baseUrl, apiKey: settings.apiKey })
    : createOpenAiClient({ baseUrl: settings.baseUrl, apiKey: settings.apiKey });
}

/** Wraps a client so 429/5xx/network failures are retried with backoff until `deadlineMs` has passed. */
export function withModelRetries(
  client: ModelClient,
  options: { deadlineMs: number; minDelayMs?: number; onRetry?: (error: unknown, attempt: number, delayMs: number) => void },
): ModelClient {
  return {
    provider: client.provider,
    complete: (request, onTextDelta) =>
      withRetries(() => client.complete(request, onTextDelta), {
        deadlineMs: options.deadlineMs,
        minDelayMs: options.minDelayMs,
        signal: request.signal,
        onRetry: options.onRetry,
      }),
  };
}
