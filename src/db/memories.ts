import { and, asc, desc, eq, gt, gte, inArray, isNotNull, isNull, lt, or, sql, type SQL } from 'drizzle-orm';
import type { Db, Queryable } from './client.ts';
import { memories } from './schema.ts';
import { textRank, withOwnPlans, type TextQuery } from './text-rank.ts';
import { cosineDistance, hasDimensions } from './vectors.ts';

export type MemoryRow = Omit<typeof memories.$inferSelect, 'search' | 'embedding' | 'embeddingModel'>;
export type RankedMemoryRow = MemoryRow & { score: number };

/** Every column but the search vector and the embedding, which recall's text ranking does not read back. */
const columns = {
  id: memories.id,
  persona: memories.persona,
  category: memories.category,
  content: memories.content,
  importance: memories.importance,
  createdAt: memories.createdAt,
  updatedAt: memories.updatedAt,
};

export async function insertMemory(db: Queryable, row: { persona: string; category: string; content: string; importance: number }): Promise<MemoryRow> {
  const [inserted] = await db.insert(memories).values(row).returning(columns);
  return inserted;
}

/** Changes the persona's memory `id`; undefined when it has none by that id. */
export async function updateMemory(
  db: Queryable,
  persona: string,
  id: number,
  patch: Partial<Pick<MemoryRow, 'category' | 'content' | 'importance'>>,
): Promise<MemoryRow | undefined> {
  const [row] = await db
    .update(memories)
    // New content needs a new embedding: the old one described what it said before.
    .set({ ...patch, ...(patch.content !== undefined ? { embedding: null, embeddingModel: null } : {}), updatedAt: sql`now()` })
    .where(and(eq(memories.persona, persona), eq(memories.id, id)))
    .returning(columns);
  return row;
}

export async function deleteMemory(db: Queryable, persona: string, id: number): Promise<boolean> {
  const rows = await db
    .delete(memories)
    .where(and(eq(memories.persona, persona), eq(memories.id, id)))
    .returning({ id: memories.id });
  return rows.length > 0;
}

export interface MemorySearch {
  persona: string;
  /** The query (textQuery); without it, the most important and recent memories. */
  text?: TextQuery;
  category?: string;
  /** Only memories written in [from, to). */
  from?: Date;
  to?: Date;
  limit: number;
}

const ageDays = sql`extract(epoch from (now() - ${memories.createdAt})) / 86400.0`;
/** A little for importance (0.02..0.2) and for recency (0.1 today, half of that a month on). */
const importanceAndRecency = sql`(${memories.importance} * 0.02 + 0.1 / (1 + ${ageDays} / 30))`;

/**
 * The persona's memories ranked for the query: full-text rank over any of its words (category above content), a
 * bonus when every word is there and a larger one for the exact phrase, the best name-like term found, and a little
 * for importance and recency. Without a query: by importance and recency (in a date range, in the order they were
 * written).
 */
export async function searchMemories(db: Db, search: MemorySearch): Promise<RankedMemoryRow[]> {
  const filters = and(
    eq(memories.persona, search.persona),
    search.category === undefined ? undefined : eq(memories.category, search.category),
    search.from === undefined ? undefined : gte(memories.createdAt, search.from),
    search.to === undefined ? undefined : lt(memories.createdAt, search.to),
  );
  if (!search.text) {
    if (search.from !== undefined || search.to !== undefined) {
      return db
        .select({ ...columns, score: sql<number>`0::float8` })
        .from(memories)
        .where(filters)
        .orderBy(asc(memories.createdAt), asc(memories.id))
        .limit(search.limit);
    }
    return mostImportantAndRecent(db, filters, search.limit);
  }
  const rank = textRank({ search: memories.search, text: search.text });
  const score = sql<number>`(${rank.score} + ${importanceAndRecency})::float8`;
  return withOwnPlans(db, {}, (tx) =>
    tx
      .select({ ...columns, score })
      .from(memories)
      .where(and(filters, rank.found))
      .orderBy(desc(score), desc(memories.id))
      .limit(search.limit),
  );
}

/**
 * By importance, and by recency within it: the best `limit` are among the newest `limit` of each importance (1..10),
 * so the index on (persona, importance, created_at) gives them without reading the persona's other memories.
 */
async function mostImportantAndRecent(db: Queryable, filters: SQL | undefined, limit: number): Promise<RankedMemoryRow[]> {
  const score = sql<number>`(${memories.importance} + 3.0 / (1 + ${ageDays} / 7))::float8`;
  const level = sql`level.importance`;
  const newest = db
    .select({ ...columns, score: score.as('score') })
    .from(memories)
    .where(and(filters, eq(memories.importance, level)))
    .orderBy(desc(memories.createdAt), desc(memories.id))
    .limit(limit)
    .as('newest');
  const rows = await db
    .select()
    .from(sql`generate_series(1, 10) as level(importance)`)
    .crossJoinLateral(newest)
    .orderBy(desc(newest.score), desc(newest.id))
    .limit(limit);
  return rows.map((r) => r.newest);
}

/** Of these memories, those without an embedding by `model`, with their text. */
export async function memoriesToEmbed(db: Queryable, ids: readonly number[], model: string): Promise<{ id: number; content: string }[]> {
  if (!ids.length) return [];
  return db
    .select({ id: memories.id, content: memories.content })
    .from(memories)
    .where(and(inArray(memories.id, [...ids]), or(isNull(memories.embedding), sql`${memories.embeddingModel} is distinct from ${model}`)));
}

/** Ids of memories (of every persona) past `afterId` with no embedding by `model`, in id order: the backfill's page. */
export async function memoriesNotEmbedded(db: Queryable, model: string, afterId: number, limit: number): Promise<number[]> {
  const rows = await db
    .select({ id: memories.id })
    .from(memories)
    .where(and(gt(memories.id, afterId), or(isNull(memories.embedding), sql`${memories.embeddingModel} is distinct from ${model}`)))
    .orderBy(asc(memories.id))
    .limit(limit);
  return rows.map((r) => r.id);
}

/** Stores each embedding unless the memory changed since its text was read (then the job of that change embeds it). */
export async function storeMemoryEmbeddings(db: Queryable, model: string, rows: readonly { id: number; content: string; embedding: number[] }[]): Promise<void> {
  for (const row of rows) {
    await db
      .update(memories)
      .set({ embedding: row.embedding, embeddingModel: model })
      .where(and(eq(memories.id, row.id), eq(memories.content, row.content)));
  }
}

export interface MemoryVectorFilter {
  persona: string;
  model: string;
  category?: string;
  from?: Date;
  to?: Date;
}

function vectorFilters(filter: MemoryVectorFilter) {
  return and(
    eq(memories.persona, filter.persona),
    eq(memories.embeddingModel, filter.model),
    isNotNull(memories.embedding),
    filter.category === undefined ? undefined : eq(memories.category, filter.category),
    filter.from === undefined ? undefined : gte(memories.createdAt, filter.from),
    filter.to === undefined ? undefined : lt(memories.createdAt, filter.to),
  );
}

/** Memories with their embeddings by `model`: those of `ids`, and the `recent` newest (to re-rank in the process). */
export async function memoriesWithEmbeddings(
  db: Queryable,
  filter: MemoryVectorFilter,
  options: { ids: readonly number[]; recent: number },
): Promise<(MemoryRow & { embedding: number[] })[]> {
  const recent = db.select({ id: memories.id }).from(memories).where(vectorFilters(filter)).orderBy(desc(memories.createdAt), desc(memories.id)).limit(options.recent);
  return (await db
    .select({ ...columns, embedding: memories.embedding })
    .from(memories)
    .where(and(vectorFilters(filter), or(inArray(memories.id, [...options.ids, -1]), inArray(memories.id, recent))))) as (MemoryRow & { embedding: number[] })[];
}

/** With pgvector: the memories nearest to `vector` (cosine), with their similarity (a query, to run or to explain). */
export function nearestMemories(db: Queryable, filter: MemoryVectorFilter, vector: readonly number[], limit: number) {
  const distance = cosineDistance(memories.embedding, vector);
  return db
    .select({ ...columns, similarity: sql<number>`(1 - ${distance})::float8` })
    .from(memories)
    .where(and(vectorFilters(filter), hasDimensions(memories.embedding, vector.length)))
    .orderBy(distance)
    .limit(limit);
}
