// The full-text and trigram scoring recall ranks by, shared by the tables it searches (memories, knowledge chunks),
// so a memory and a chunk that match a query equally well score alike.
import { or, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { Db, Queryable } from './client.ts';
import { MEMORY_TEXT_SEARCH } from './schema.ts';

/**
 * Below this word similarity a query word does not count as found by trigram ("Mikhael" and "Michael" are 0.45,
 * "Jonh" and "John" 0.4; an unrelated word of the same length is seldom above 0.3).
 */
export const WORD_SIMILARITY_THRESHOLD = 0.39;

export const textSearchConfig = sql.raw(`'${MEMORY_TEXT_SEARCH}'::regconfig`);

export interface TextRankInput {
  /** The row's tsvector. */
  search: SQLWrapper;
  /** The texts a name may be found in by trigram; the first must have the trigram index (its `<%` filters). */
  texts: SQLWrapper[];
  query: string;
  /** pg_trgm is installed. */
  trigram: boolean;
  /** ts_rank_cd's weights {D, C, B, A}; Postgres's own when absent. */
  weights?: readonly [number, number, number, number];
}

export interface TextRank {
  /** Full-text rank over any word, a bonus for every word and a larger one for the phrase, plus trigram similarity. */
  score: SQL;
  /** Whether a row matches at all. */
  found: SQL;
  /** The words matched by trigram (none: no trigram threshold to set). */
  names: string[];
}

/** How well a row matches `query`; undefined when the query has no words. */
export function textRank(input: TextRankInput): TextRank | undefined {
  const words = queryWords(input.query);
  if (!words.length) return undefined;
  // websearch_to_tsquery never fails on user text; "or" between the words finds rows with any of them.
  const anyWord = sql`websearch_to_tsquery(${textSearchConfig}, ${words.join(' or ')})`;
  const everyWord = sql`websearch_to_tsquery(${textSearchConfig}, ${input.query})`;
  const phrase = sql`phraseto_tsquery(${textSearchConfig}, ${input.query})`;
  const names = input.trigram ? trigramWords(words) : [];
  const similarity = sql`greatest(${sql.join(
    names.flatMap((w) => input.texts.map((text) => sql`word_similarity(${w}, ${text})`)),
    sql`, `,
  )})`;
  // A scalar subquery, so each row's similarities are computed once, not once for the test and again for the score.
  const trigramScore = names.length
    ? sql`(select case when s > ${WORD_SIMILARITY_THRESHOLD}::float8 then s * 0.5 else 0 end from (select ${similarity} as s) as best)`
    : sql`0`;
  const weights = input.weights ? sql`${sql.raw(`'{${input.weights.join(',')}}'::float4[]`)}, ` : sql``;
  const score = sql`(
    ts_rank_cd(${weights}${input.search}, ${anyWord}, 32)
    + case when ${input.search} @@ ${everyWord} then 0.3 else 0 end
    + ${words.length > 1 ? sql`case when ${input.search} @@ ${phrase} then 0.4 else 0 end` : sql`0`}
    + ${trigramScore}
  )`;
  const found = or(sql`${input.search} @@ ${anyWord}`, ...names.map((w) => sql`${w} <% ${input.texts[0]}`))!;
  return { score, found, names };
}

/** Runs `query` with the trigram operator's threshold set for it alone (it is a setting, not an argument). */
export async function withWordSimilarity<T>(db: Db, names: readonly string[], query: (tx: Queryable) => Promise<T>): Promise<T> {
  if (!names.length) return query(db);
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('pg_trgm.word_similarity_threshold', ${String(WORD_SIMILARITY_THRESHOLD)}, true)`);
    return query(tx);
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
