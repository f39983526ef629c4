// recall's ranking: memories and knowledge chunks found by full-text search (and trigram similarity), in one list
// on one scale. With an embedding endpoint the query is embedded too (with a short timeout): rows close in
// meaning join the candidates and every candidate gains by its similarity. pgvector finds the nearest rows where
// the database has it; without it the nearest are looked for among the newest rows with embeddings, in the
// process. When the endpoint fails, recall ranks by text as it does without one.
import type { Logger } from 'pino';
import type { Database } from '#src/db/client.ts';
import { extensionStates } from '#src/db/extensions.ts';
import { chunksWithEmbeddings, nearestChunks, searchChunks, type KnowledgeChunkRow } from '#src/db/knowledge.ts';
import { memoriesWithEmbeddings, nearestMemories, searchMemories, type MemoryRow } from '#src/db/memories.ts';
import { queryWords, textQuery } from '#src/db/text-rank.ts';
import { ensureHnswIndex } from '#src/db/vectors.ts';
import { cosine, type EmbeddingClient } from './embeddings.ts';

export type RecallSource = 'all' | 'memories' | 'knowledge';

export interface RecallRequest {
  query?: string;
  category?: string;
  /** Written in [from, to). */
  from?: Date;
  to?: Date;
  limit: number;
  /** Default all. A category or a date narrows to memories (chunks have neither). */
  source?: RecallSource;
}

export type RecallHit =
  | { kind: 'memory'; memory: Omit<MemoryRow, 'persona'>; score: number }
  | { kind: 'knowledge'; chunk: KnowledgeChunkRow; score: number };

/** How long a recall waits for its query's embedding before ranking by text alone. */
export const QUERY_EMBEDDING_TIMEOUT_MS = 3000;
/** Without pgvector: how many of the newest rows with embeddings (of each kind) are compared with the query. */
export const RECENT_EMBEDDED_ROWS = 300;
/**
 * Below this cosine similarity a row found by meaning alone is left out. Embedding models put unrelated texts at
 * 0.0-0.4 and paraphrases at 0.5 and above, so a row that shares no word with the query must be clearly close.
 */
export const MIN_SEMANTIC_SIMILARITY = 0.45;
/** What a similarity of 1 adds to a row's score (a strong text match scores about 1). */
const SEMANTIC_WEIGHT = 0.8;

export interface Recaller {
  recall(persona: string, request: RecallRequest): Promise<RecallHit[]>;
}

export function createRecaller(deps: { database: Pick<Database, 'db'>; embeddings?: EmbeddingClient; log?: Logger }): Recaller {
  const { db } = deps.database;
  // Looked up once, again after a failed look.
  let extensions: Promise<{ trigram: boolean; vector: boolean }> | undefined;
  const installed = () =>
    (extensions ??= extensionStates(db, ['pg_trgm', 'vector']).then(
      (s) => ({ trigram: s.pg_trgm.installed, vector: s.vector.installed }),
      () => ((extensions = undefined), { trigram: false, vector: false }),
    ));
  const indexed = new Set<string>();

  async function queryVector(query: string): Promise<number[] | undefined> {
    if (!deps.embeddings) return undefined;
    try {
      const [vector] = await deps.embeddings.embed([query], { timeoutMs: QUERY_EMBEDDING_TIMEOUT_MS });
      return vector;
    } catch (err) {
      deps.log?.warn({ err }, 'the query could not be embedded; recall ranks by text');
      return undefined;
    }
  }

  /** With pgvector, its HNSW index for this dimension, made once (in the background) per process. */
  function ensureIndexes(dimensions: number) {
    for (const table of ['memories', 'knowledge_chunks'] as const) {
      const key = `${table}:${dimensions}`;
      if (indexed.has(key)) continue;
      indexed.add(key);
      ensureHnswIndex(db, table, dimensions).catch((err) => deps.log?.warn({ err, table, dimensions }, 'the vector index could not be made; search scans'));
    }
  }

  return {
    async recall(persona, request) {
      const source = request.source ?? 'all';
      const narrowed = request.category !== undefined || request.from !== undefined || request.to !== undefined;
      const wantMemories = source !== 'knowledge';
      const wantKnowledge = source !== 'memories' && !narrowed;
      const query = request.query ?? '';
      const { trigram, vector: pgvector } = await installed();
      const [text, vector] = await Promise.all([textQuery(db, persona, query, trigram), queryWords(query).length ? queryVector(query) : undefined]);
      if (!text) {
        // A listing: memories by importance and recency, or by day; chunks have no order of their own.
        if (!wantMemories) return [];
        const rows = await searchMemories(db, { persona, ...request, text: undefined });
        return rows.map(({ persona: _persona, score, ...memory }) => ({ kind: 'memory', memory, score }));
      }
      const candidates = Math.max(request.limit * 3, 30);
      const [memoryRows, chunkRows] = await Promise.all([
        wantMemories ? searchMemories(db, { persona, ...request, text, limit: candidates }) : [],
        wantKnowledge ? searchChunks(db, { persona, text, limit: candidates }) : [],
      ]);
      const hits = new Map<string, RecallHit>();
      for (const { persona: _persona, score, ...memory } of memoryRows) hits.set(`m${memory.id}`, { kind: 'memory', memory, score });
      for (const { score, ...chunk } of chunkRows) hits.set(`k${chunk.id}`, { kind: 'knowledge', chunk, score });
      if (vector && deps.embeddings) {
        const model = deps.embeddings.model;
        if (pgvector) ensureIndexes(vector.length);
        const filter = { persona, model, category: request.category, from: request.from, to: request.to };
        const recent = pgvector ? 0 : RECENT_EMBEDDED_ROWS;
        const [memoryVectors, chunkVectors, nearMemories, nearChunks] = await Promise.all([
          wantMemories ? memoriesWithEmbeddings(db, filter, { ids: memoryRows.map((r) => r.id), recent }) : [],
          wantKnowledge ? chunksWithEmbeddings(db, filter, { ids: chunkRows.map((r) => r.id), recent }) : [],
          wantMemories && pgvector ? nearestMemories(db, filter, vector, candidates) : [],
          wantKnowledge && pgvector ? nearestChunks(db, filter, vector, candidates) : [],
        ]);
        const similar: [string, RecallHit, number][] = [
          ...memoryVectors.map(({ persona: _persona, embedding, ...memory }) => [`m${memory.id}`, { kind: 'memory', memory, score: 0 }, cosine(vector, embedding)] as [string, RecallHit, number]),
          ...nearMemories.map(({ persona: _persona, similarity, ...memory }) => [`m${memory.id}`, { kind: 'memory', memory, score: 0 }, similarity] as [string, RecallHit, number]),
          ...chunkVectors.map(({ embedding, ...chunk }) => [`k${chunk.id}`, { kind: 'knowledge', chunk, score: 0 }, cosine(vector, embedding)] as [string, RecallHit, number]),
          ...nearChunks.map(({ similarity, ...chunk }) => [`k${chunk.id}`, { kind: 'knowledge', chunk, score: 0 }, similarity] as [string, RecallHit, number]),
        ];
        const boosted = new Set<string>();
        for (const [key, hit, similarity] of similar) {
          if (boosted.has(key)) continue;
          boosted.add(key);
          const found = hits.get(key);
          if (found) found.score += SEMANTIC_WEIGHT * Math.max(0, similarity);
          else if (similarity >= MIN_SEMANTIC_SIMILARITY) hits.set(key, { ...hit, score: SEMANTIC_WEIGHT * similarity });
        }
      }
      return [...hits.values()].sort((a, b) => b.score - a.score || order(a) - order(b)).slice(0, request.limit);
    },
  };
}

/** Ties: memories before chunks, the newer memory first, a source's chunks in their order. */
const order = (hit: RecallHit) => (hit.kind === 'memory' ? -hit.memory.id : hit.chunk.id + 2 ** 40);
