// A fake OpenAI-style embedding endpoint on loopback (POST /v1/embeddings). A text's vector is a bag of concepts:
// synonyms share one concept ("car", "automobile" and "sedan" are all VEHICLE), so a paraphrase that shares no
// word with the original still lands close to it, and texts about different things are orthogonal. Deterministic;
// it can be made slow or made to fail, and it records every request.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export const DIMENSIONS = 256;

const CONCEPTS: Record<string, string[]> = {
  vehicle: ['car', 'cars', 'automobile', 'automobiles', 'sedan', 'motorcar', 'vehicle'],
  failure: ['broke', 'broken', 'died', 'failed', 'breakdown', 'conked', 'malfunctioned'],
  road: ['highway', 'motorway', 'freeway', 'road', 'autobahn'],
  feline: ['cat', 'cats', 'kitten', 'feline', 'tabby'],
  physician: ['doctor', 'physician', 'gp', 'medic'],
  illness: ['sick', 'ill', 'unwell', 'flu', 'fever'],
  money: ['money', 'cash', 'salary', 'pay', 'wages', 'income'],
  raise: ['raise', 'increase', 'bump', 'rise'],
};
const STOP = new Set('a an the on in at of to my our his her their was is are be been it its and or down up with for by'.split(' '));

const conceptIndex = new Map<string, number>();
Object.values(CONCEPTS).forEach((words, i) => words.forEach((w) => conceptIndex.set(w, i)));
const KNOWN = Object.keys(CONCEPTS).length;

/** Any other word gets a dimension of its own (by hash, past the named concepts). */
function dimensionOf(word: string): number {
  const known = conceptIndex.get(word);
  if (known !== undefined) return known;
  let hash = 2166136261;
  for (const c of word) hash = Math.imul(hash ^ c.codePointAt(0)!, 16777619) >>> 0;
  return KNOWN + (hash % (DIMENSIONS - KNOWN));
}

export function fakeEmbedding(text: string): number[] {
  const vector = new Array<number>(DIMENSIONS).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) if (!STOP.has(word)) vector[dimensionOf(word)] += 1;
  const norm = Math.hypot(...vector);
  // A text of stop words only still gets a vector (the wire format has no "none").
  return norm ? vector.map((v) => v / norm) : vector.map((_, i) => (i === DIMENSIONS - 1 ? 1 : 0));
}

export interface FakeEmbeddings {
  baseUrl: string;
  /** Every request's inputs, in order, and when it arrived. */
  requests: { inputs: string[]; model: string; at: number }[];
  /** Milliseconds each answer waits. */
  delayMs: number;
  /** While above 0, requests fail with this status (and the count goes down). */
  failures: { remaining: number; status: number };
  close(): Promise<void>;
}

export async function startFakeEmbeddings(): Promise<FakeEmbeddings> {
  const fake: Omit<FakeEmbeddings, 'baseUrl' | 'close'> = { requests: [], delayMs: 0, failures: { remaining: 0, status: 503 } };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', async () => {
      if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
        res.writeHead(404).end();
        return;
      }
      const { model, input } = JSON.parse(body) as { model: string; input: string[] };
      fake.requests.push({ inputs: input, model, at: Date.now() });
      if (fake.delayMs) await new Promise((resolve) => setTimeout(resolve, fake.delayMs));
      if (fake.failures.remaining > 0) {
        fake.failures.remaining--;
        res.writeHead(fake.failures.status, { 'content-type': 'application/json' }).end('{"error":{"message":"overloaded"}}');
        return;
      }
      const data = input.map((text, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(text) }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', model, data }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(fake, {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
