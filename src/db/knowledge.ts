import { and, asc, desc, eq, gt, inArray, isNotNull, isNull, or, sql } from 'drizzle-orm';
import type { Db, Queryable } from './client.ts';
import { knowledgeChunks, knowledgeSources } from './schema.ts';
import { textRank, withOwnPlans, type TextQuery } from './text-rank.ts';
import { cosineDistance, hasDimensions } from './vectors.ts';

export type KnowledgeSourceRow = typeof knowledgeSources.$inferSelect;
export type KnowledgeState = 'ingesting' | 'ready' | 'failed';

export interface KnowledgeChunkRow {
  id: number;
  source: string;
  chunk: number;
  content: string;
}

const chunkColumns = { id: knowledgeChunks.id, source: knowledgeChunks.source, chunk: knowledgeChunks.chunk, content: knowledgeChunks.content };

/** The source is being ingested (its chunks, if any, stay searchable until the new ones replace them). */
export async function markSourceIngesting(db: Queryable, row: { persona: string; source: string; path: string | null }): Promise<void> {
  await db
    .insert(knowledgeSources)
    .values({ ...row, state: 'ingesting' })
    .onConflictDoUpdate({
      target: [knowledgeSources.persona, knowledgeSources.source],
      set: { path: row.path, state: 'ingesting', error: null, updatedAt: sql`now()` },
    });
}

/**
 * Replaces the source's chunks with `chunks`, and marks it ready, in one transaction; `after` runs inside it with
 * the new chunks' ids (to enqueue their embedding in the same commit).
 */
export async function replaceSourceChunks(
  db: Db,
  row: { persona: string; source: string; path: string | null; chunks: readonly string[] },
  after?: (tx: Queryable, ids: number[]) => Promise<void>,
): Promise<number[]> {
  return db.transaction(async (tx) => {
    await tx
      .insert(knowledgeSources)
      .values({ persona: row.persona, source: row.source, path: row.path, state: 'ready', chunks: row.chunks.length })
      .onConflictDoUpdate({
        target: [knowledgeSources.persona, knowledgeSources.source],
        set: { path: row.path, state: 'ready', error: null, chunks: row.chunks.length, updatedAt: sql`now()` },
      });
    await tx.delete(knowledgeChunks).where(and(eq(knowledgeChunks.persona, row.persona), eq(knowledgeChunks.source, row.source)));
    // One statement with one parameter however long the document: its words reach recall's vocabulary in one
    // insert, in word order (a trigger), so an ingest and a memory written at the same time cannot deadlock there.
    const inserted = await tx.execute<{ id: string | number; chunk: number }>(sql`
      insert into ${knowledgeChunks} (persona, source, chunk, content)
      select ${row.persona}, ${row.source}, (part.n - 1)::int, part.content
      from json_array_elements_text(${JSON.stringify(row.chunks)}::json) with ordinality as part(content, n)
      returning id, chunk`);
    const ids = [...inserted].sort((a, b) => a.chunk - b.chunk).map((r) => Number(r.id));
    await after?.(tx, ids);
    return ids;
  });
}

/** Why the source could not be ingested; `final` when no retry is left (else it stays `ingesting`). */
export async function markSourceFailed(db: Queryable, persona: string, source: string, error: string, final: boolean): Promise<void> {
  await db
    .update(knowledgeSources)
    .set({ state: final ? 'failed' : 'ingesting', error, updatedAt: sql`now()` })
    .where(and(eq(knowledgeSources.persona, persona), eq(knowledgeSources.source, source)));
}

export async function knowledgeSourcesOf(db: Queryable, persona: string): Promise<KnowledgeSourceRow[]> {
  return db.select().from(knowledgeSources).where(eq(knowledgeSources.persona, persona)).orderBy(asc(knowledgeSources.source));
}

/** What counts a chunk as a middling memory of today (importance 5), so chunks and memories rank on one scale. */
const CHUNK_BASE_SCORE = 0.2;
/** The tsvector has no weights (all D): the content counts as a memory's content (B) does. */
const CHUNK_WEIGHTS = [0.4, 0.2, 0.4, 1.0] as const;

/** The persona's chunks ranked for the query as memories are (full text, and the names a misspelt word stands for). */
export async function searchChunks(db: Db, search: { persona: string; text: TextQuery; limit: number }): Promise<(KnowledgeChunkRow & { score: number })[]> {
  const rank = textRank({ search: knowledgeChunks.search, text: search.text, weights: CHUNK_WEIGHTS });
  const score = sql<number>`(${rank.score} + ${CHUNK_BASE_SCORE})::float8`;
  return withOwnPlans(db, {}, (tx) =>
    tx
      .select({ ...chunkColumns, score })
      .from(knowledgeChunks)
      .where(and(eq(knowledgeChunks.persona, search.persona), rank.found))
      .orderBy(desc(score), asc(knowledgeChunks.id))
      .limit(search.limit),
  );
}

/** Of these chunks, those without an embedding by `model`, with their text. */
export async function chunksToEmbed(db: Queryable, ids: readonly number[], model: string): Promise<{ id: number; content: string }[]> {
  if (!ids.length) return [];
  return db
    .select({ id: knowledgeChunks.id, content: knowledgeChunks.content })
    .from(knowledgeChunks)
    .where(and(inArray(knowledgeChunks.id, [...ids]), or(isNull(knowledgeChunks.embedding), sql`${knowledgeChunks.embeddingModel} is distinct from ${model}`)));
}

/** Ids of chunks (of every persona) past `afterId` with no embedding by `model`, in id order: the backfill's page. */
export async function chunksNotEmbedded(db: Queryable, model: string, afterId: number, limit: number): Promise<number[]> {
  const rows = await db
    .select({ id: knowledgeChunks.id })
    .from(knowledgeChunks)
    .where(and(gt(knowledgeChunks.id, afterId), or(isNull(knowledgeChunks.embedding), sql`${knowledgeChunks.embeddingModel} is distinct from ${model}`)))
    .orderBy(asc(knowledgeChunks.id))
    .limit(limit);
  return rows.map((r) => r.id);
}

/** Chunks are never edited (a re-ingest makes new rows), so an embedding is stored by id alone. */
export async function storeChunkEmbeddings(db: Queryable, model: string, rows: readonly { id: number; embedding: number[] }[]): Promise<void> {
  for (const row of rows) await db.update(knowledgeChunks).set({ embedding: row.embedding, embeddingModel: model }).where(eq(knowledgeChunks.id, row.id));
}

const embedded = (persona: string, model: string) =>
  and(eq(knowledgeChunks.persona, persona), eq(knowledgeChunks.embeddingModel, model), isNotNull(knowledgeChunks.embedding));

/** Chunks with their embeddings by `model`: those of `ids`, and the `recent` newest (to re-rank in the process). */
export async function chunksWithEmbeddings(
  db: Queryable,
  filter: { persona: string; model: string },
  options: { ids: readonly number[]; recent: number },
): Promise<(KnowledgeChunkRow & { embedding: number[] })[]> {
  const where = embedded(filter.persona, filter.model);
  const recent = db.select({ id: knowledgeChunks.id }).from(knowledgeChunks).where(where).orderBy(desc(knowledgeChunks.id)).limit(options.recent);
  return (await db
    .select({ ...chunkColumns, embedding: knowledgeChunks.embedding })
    .from(knowledgeChunks)
    .where(and(where, or(inArray(knowledgeChunks.id, [...options.ids, -1]), inArray(knowledgeChunks.id, recent))))) as (KnowledgeChunkRow & { embedding: number[] })[];
}

/** With pgvector: the chunks nearest to `vector` (cosine), with their similarity. */
export async function nearestChunks(
  db: Queryable,
  filter: { persona: string; model: string },
  vector: readonly number[],
  limit: number,
): Promise<(KnowledgeChunkRow & { similarity: number })[]> {
  const distance = cosineDistance(knowledgeChunks.embedding, vector);
  return db
    .select({ ...chunkColumns, similarity: sql<number>`(1 - ${distance})::float8` })
    .from(knowledgeChunks)
    .where(and(embedded(filter.persona, filter.model), hasDimensions(knowledgeChunks.embedding, vector.length)))
    .orderBy(distance)
    .limit(limit);
}
