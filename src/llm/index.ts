import type { LlmSettings } from '#src/config/env.ts';
import { withRetries } from '#src/retry.ts';
import type { ModelClient } from './types.ts';

/** Loads only the configured provider's client (the Anthropic SDK weighs tens of MB). */
export async function createModelClient(settings: LlmSettings): Promise<ModelClient> {
  const options = { baseUrl: settings.baseUrl, apiKey: settings.apiKey, stallMs: settings.stallMs };
  return settings.provider === 'anthropic'
    ? (await import('./anthropic.ts')).createAnthropicClient(options)
    : (await import('./openai.ts')).createOpenAiClient(options);
}

/** The endpoint a provider's requests go to, for logs and messages. */
export function modelEndpoint(settings: Pick<LlmSettings, 'provider' | 'baseUrl'>): string {
  return settings.baseUrl ?? (settings.provider === 'anthropic' ? 'https://api.anthropic.com' : 'https://api.openai.com/v1');
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
