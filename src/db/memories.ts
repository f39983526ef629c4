import { and, asc, desc, eq, gte, lt, or, sql, type SQL } from 'drizzle-orm';
import type { Db, Queryable } from './client.ts';
import { MEMORY_TEXT_SEARCH, memories } from './schema.ts';

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
    .set({ ...patch, updatedAt: sql`now()` })
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
  /** Free text; without it, the most important and recent memories. */
  query?: string;
  category?: string;
  /** Only memories written in [from, to). */
  from?: Date;
  to?: Date;
  limit: number;
  /** pg_trgm is installed: words of the query also match names and typos by trigram similarity. */
  trigram: boolean;
}

/**
 * Below this word similarity a query word does not count as found by trigram ("Mikhael" and "Michael" are 0.45,
 * "Jonh" and "John" 0.4; an unrelated word of the same length is seldom above 0.3).
 */
export const WORD_SIMILARITY_THRESHOLD = 0.39;

const cfg = sql.raw(`'${MEMORY_TEXT_SEARCH}'::regconfig`);
const ageDays = sql`extract(epoch from (now() - ${memories.createdAt})) / 86400.0`;
/** A little for importance (0.02..0.2) and for recency (0.1 today, half of that a month on). */
const importanceAndRecency = sql`(${memories.importance} * 0.02 + 0.1 / (1 + ${ageDays} / 30))`;

/**
 * The persona's memories ranked for `query`: full-text rank over any of its words (category above content), a bonus
 * when every word is there and a larger one for the exact phrase, the best trigram similarity of its name-like
 * words, and a little for importance and recency. Without a query: by importance and recency (in a date range,
 * in the order they were written).
 */
export async function searchMemories(db: Db, search: MemorySearch): Promise<RankedMemoryRow[]> {
  const filters = and(
    eq(memories.persona, search.persona),
    search.category === undefined ? undefined : eq(memories.category, search.category),
    search.from === undefined ? undefined : gte(memories.createdAt, search.from),
    search.to === undefined ? undefined : lt(memories.createdAt, search.to),
  );
  const words = queryWords(search.query ?? '');
  if (!words.length) {
    const ranged = search.from !== undefined || search.to !== undefined;
    const score = sql<number>`(${memories.importance} + 3.0 / (1 + ${ageDays} / 7))::float8`;
    return db
      .select({ ...columns, score })
      .from(memories)
      .where(filters)
      .orderBy(...(ranged ? [asc(memories.createdAt), asc(memories.id)] : [desc(score), desc(memories.id)]))
      .limit(search.limit);
  }
  const query = search.query!;
  // websearch_to_tsquery never fails on user text; "or" between the words finds memories with any of them.
  const anyWord = sql`websearch_to_tsquery(${cfg}, ${words.join(' or ')})`;
  const everyWord = sql`websearch_to_tsquery(${cfg}, ${query})`;
  const phrase = sql`phraseto_tsquery(${cfg}, ${query})`;
  const names = search.trigram ? trigramWords(words) : [];
  // A name in the category counts as well as one in the content (only the content has a trigram index).
  const similarity = sql`greatest(${sql.join(
    names.flatMap((w) => [sql`word_similarity(${w}, ${memories.content})`, sql`word_similarity(${w}, ${memories.category})`]),
    sql`, `,
  )})`;
  const trigramScore = names.length ? sql`case when ${similarity} > ${WORD_SIMILARITY_THRESHOLD}::float8 then ${similarity} * 0.5 else 0 end` : sql`0`;
  const score = sql<number>`(
    ts_rank_cd(${memories.search}, ${anyWord}, 32)
    + case when ${memories.search} @@ ${everyWord} then 0.3 else 0 end
    + ${words.length > 1 ? sql`case when ${memories.search} @@ ${phrase} then 0.4 else 0 end` : sql`0`}
    + ${trigramScore}
    + ${importanceAndRecency}
  )::float8`;
  // The trigram operator (<%) uses the index; its threshold is a setting, so it is set for this query alone.
  const found: SQL | undefined = or(sql`${memories.search} @@ ${anyWord}`, ...names.map((w) => sql`${w} <% ${memories.content}`));
  const run = (tx: Queryable) =>
    tx
      .select({ ...columns, score })
      .from(memories)
      .where(and(filters, found))
      .orderBy(desc(score), desc(memories.id))
      .limit(search.limit);
  if (!names.length) return run(db);
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('pg_trgm.word_similarity_threshold', ${String(WORD_SIMILARITY_THRESHOLD)}, true)`);
    return run(tx);
  });
}

const MAX_WORDS = 16;
const MAX_TRIGRAM_WORDS = 6;
/** Words too common to look for by trigram (full-text search drops them by itself). */
const COMMON = new Set(
  (
    'the and for are but not you all any can had her was one our out has him his how its may new now see two who did get let say she too use ' +
    'what when where which while with about above after again also been before being from have here into just like more most much only other ' +
    'over same some such than that their them then there these they this those very were will would your could should does done each few ' +
    'told said know think want remember recall memory memories'
  ).split(' '),
);

/** The words of a query (letters and digits), at most a few, without websearch's own operator word. */
export function queryWords(query: string): string[] {
  const words = query.match(/[\p{L}\p{N}]+/gu) ?? [];
  return [...new Set(words.filter((w) => w.toLowerCase() !== 'or'))].slice(0, MAX_WORDS);
}

/** The words worth a trigram match: names and rare words, not the glue of a sentence. */
function trigramWords(words: string[]): string[] {
  return words.filter((w) => w.length >= 3 && !COMMON.has(w.toLowerCase())).slice(0, MAX_TRIGRAM_WORDS);
}
