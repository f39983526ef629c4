import type { Readable } from 'node:stream';
import { Agent, request } from '#src/http/undici.ts';

/**
 * The `fetch` grammY calls the Bot API with, on undici's request: grammY reads only the answer's JSON, and node-fetch
 * (its default on Node) cost twice the CPU per call. Connections are kept for the next call; grammY's own timeout
 * (its signal) bounds a call, so undici sets none of its own.
 */
export function createBotApiFetch(): typeof fetch {
  const dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  const botApiFetch = async (url: string | URL | Request, init: RequestInit = {}) => {
    const answer = await request(String(url), {
      method: (init.method ?? 'GET') as 'GET' | 'POST',
      headers: init.headers as Record<string, string> | undefined,
      // JSON as a string, or a file upload's multipart stream.
      body: init.body as string | Readable | null | undefined,
      signal: init.signal ?? undefined,
      dispatcher,
    });
    return { ok: answer.statusCode < 300, status: answer.statusCode, json: () => answer.body.json() } as unknown as Response;
  };
  return botApiFetch as typeof fetch;
}
