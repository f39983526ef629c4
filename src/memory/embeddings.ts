// Embeddings from an OpenAI-compatible endpoint (POST {base}/embeddings {model, input: [...]}), for recall's
// semantic ranking. Rows are embedded by a job after they are written; only a recall's query is embedded in a turn.
import { withDeadline } from '#src/abort.ts';

export interface EmbeddingSettings {
  baseUrl: string;
  model: string;
  apiKey?: string;
}

export interface EmbeddingClient {
  readonly model: string;
  /** One vector per input, in order. Throws EmbeddingError. */
  embed(inputs: readonly string[], options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<number[][]>;
}

export class EmbeddingError extends Error {
  override name = 'EmbeddingError';
  constructor(
    message: string,
    readonly url: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const DEFAULT_TIMEOUT_MS = 60_000;

export function createEmbeddingClient(settings: EmbeddingSettings): EmbeddingClient {
  const url = `${settings.baseUrl.replace(/\/+$/, '')}/embeddings`;
  return {
    model: settings.model,
    async embed(inputs, options = {}) {
      if (!inputs.length) return [];
      return withDeadline(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, options.signal, (signal) => embedOnce(inputs, signal));
    },
  };

  async function embedOnce(inputs: readonly string[], signal: AbortSignal): Promise<number[][]> {
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {}) },
        body: JSON.stringify({ model: settings.model, input: inputs }),
        signal,
      });
    } catch (err) {
      throw new EmbeddingError(`cannot reach ${url}: ${(err as Error).message}`, url, undefined, { cause: err });
    }
    if (!response.ok) {
      const body = (await response.text().catch(() => '')).slice(0, 200);
      throw new EmbeddingError(`${url} answered HTTP ${response.status}${body ? `: ${body}` : ''}`, url, response.status);
    }
    const json = (await response.json().catch(() => undefined)) as { data?: { index?: number; embedding?: unknown }[] } | undefined;
    const data = json?.data;
    if (!Array.isArray(data) || data.length !== inputs.length) {
      throw new EmbeddingError(`${url} did not answer with ${inputs.length} embedding(s)`, url, response.status);
    }
    // The wire format numbers each embedding; most servers answer in order, but the index is what counts.
    const vectors: number[][] = new Array(inputs.length);
    data.forEach((item, position) => {
      const vector = item.embedding;
      if (!Array.isArray(vector) || !vector.length || !vector.every((v) => typeof v === 'number' && Number.isFinite(v))) {
        throw new EmbeddingError(`${url} answered an embedding that is not a list of numbers`, url, response.status);
      }
      vectors[typeof item.index === 'number' ? item.index : position] = vector as number[];
    });
    if (vectors.some((v) => v === undefined)) throw new EmbeddingError(`${url} answered embeddings with wrong indexes`, url, response.status);
    return vectors;
  }
}

/** Cosine similarity, -1..1 (0 when either vector is all zeros or their lengths differ). */
export function cosine(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}
