// The full-text scoring recall ranks by, shared by the tables it searches (memories, knowledge chunks), so a memory
// and a chunk that match a query equally well score alike. Names and typos are found through the persona's
// vocabulary (recall_words, by trigram) and then searched by full text like the query's own words.
import { sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import { distance } from 'fastest-levenshtein';
import type { Db, Queryable } from './client.ts';
import { MEMORY_TEXT_SEARCH, recallWords } from './schema.ts';

/**
 * At this word similarity a word counts as meant by a query word however many letters differ ("Mikhael" and
 * "Michael" are 0.45, "Jonh" and "John" 0.4; an unrelated word of the same length is seldom above 0.3).
 */
export const WORD_SIMILARITY_THRESHOLD = 0.39;

export const textSearchConfig = sql.raw(`'${MEMORY_TEXT_SEARCH}'::regconfig`);

/** A query as recall searches it: its words, and the name-like ones with the persona's words they may stand for. */
export interface TextQuery {
  query: string;
  words: string[];
  /**
   * Each name-like word of the query at similarity 1, and each word of the persona's texts found by trigram to be
   * like one of them (a misspelt name finds the name), at its word similarity. Empty without pg_trgm.
   */
  terms: { word: string; similarity: number }[];
}

/** Words of the persona's vocabulary a name-like word of the query may stand for, at most. */
const TERMS_PER_WORD = 3;
/** Words of the vocabulary looked at for each (the most similar by trigram), before counting their edits. */
const CANDIDATES_PER_WORD = 20;
/** The trigram similarity a candidate needs: low, as two swapped letters break up to four trigrams. */
const CANDIDATE_SIMILARITY = 0.2;
/** A slip of the keyboard changes a word's length by two letters at most. */
const LENGTH_SLACK = 2;

/**
 * The query's words, and with pg_trgm the words of the persona's memories and knowledge each name-like one they do
 * not contain may be a slip for: the most similar by trigram in recall_words (its index; a few thousand words, not
 * every row's text), kept when they are a letter or two away (a swap counts as one) or similar enough by trigram.
 * Undefined when the query has no words.
 */
export async function textQuery(db: Db, persona: string, query: string, trigram: boolean): Promise<TextQuery | undefined> {
  const words = queryWords(query);
  if (!words.length) return undefined;
  const names = trigram ? trigramWords(words) : [];
  if (!names.length) return { query, words, terms: [] };
  // The `<%` operator's threshold is a setting, not an argument: set for this transaction alone.
  const candidates = await withOwnPlans(db, { 'pg_trgm.word_similarity_threshold': String(CANDIDATE_SIMILARITY) }, async (tx) => {
    const asked = sql`array[${sql.join(names.map((w) => sql`${w}`), sql`, `)}]::text[]`;
    return tx.execute<{ asked: string; word: string; similarity: number }>(sql`
      select asked.word as asked, found.word, found.similarity
      from unnest(${asked}) as asked(word)
      -- A word the persona's texts have is searched as it is: only one they lack may be a slip for another.
      cross join lateral (select where not exists (select from ${recallWords} e where e.persona = ${persona} and e.word = lower(asked.word))) as absent
      cross join lateral (
        select v.word, word_similarity(asked.word, v.word)::float8 as similarity
        from ${recallWords} v
        where v.persona = ${persona} and asked.word <% v.word and v.word <> lower(asked.word)
          and numnode(plainto_tsquery(${textSearchConfig}, v.word)) > 0
          and length(v.word) between length(asked.word) - ${LENGTH_SLACK} and length(asked.word) + ${LENGTH_SLACK}
        order by similarity(asked.word, v.word) desc, v.word
        limit ${CANDIDATES_PER_WORD}
      ) as found`);
  });
  const terms = names.map((word) => ({ word, similarity: 1 }));
  for (const name of names) {
    const likely = [...candidates]
      .filter((c) => c.asked === name)
      .map((c) => ({ word: c.word, similarity: slipSimilarity(name.toLowerCase(), c.word, Number(c.similarity)) }))
      .filter((c): c is { word: string; similarity: number } => c.similarity !== undefined)
      .sort((a, b) => b.similarity - a.similarity || a.word.localeCompare(b.word))
      .slice(0, TERMS_PER_WORD);
    terms.push(...likely);
  }
  return { query, words, terms };
}

/**
 * How likely `word` is what was meant by `asked`: 1 less a share for each edit when it is one edit away (two for a
 * word over four letters; swapping two letters is one), else its trigram similarity if that is high enough on its
 * own; undefined when neither.
 */
function slipSimilarity(asked: string, word: string, trigramSimilarity: number): number | undefined {
  const edits = editDistance(asked, word);
  if (edits <= (asked.length <= 4 ? 1 : 2)) return Math.max(trigramSimilarity, 1 - edits / Math.max(asked.length, word.length));
  return trigramSimilarity >= WORD_SIMILARITY_THRESHOLD ? trigramSimilarity : undefined;
}

/** Levenshtein distance, with two neighbouring letters swapped counted as one edit. */
function editDistance(a: string, b: string): number {
  const plain = distance(a, b);
  if (plain !== 2 || a.length !== b.length) return plain;
  const i = [...a].findIndex((ch, k) => ch !== b[k]);
  return a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2) ? 1 : plain;
}

/**
 * Runs `query` in a transaction (with `settings` for it alone) whose statements are planned for their own values.
 * Statements are prepared, and after five runs Postgres may keep a generic plan, which knows nothing of the words
 * searched for: a search that reads a few thousand rows by the full-text index would read every row of the persona.
 */
export async function withOwnPlans<T>(db: Db, settings: Record<string, string>, query: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    const all = { ...settings, plan_cache_mode: 'force_custom_plan' };
    await tx.execute(sql`select ${sql.join(Object.entries(all).map(([name, value]) => sql`set_config(${name}, ${value}, true)`), sql`, `)}`);
    return query(tx);
  });
}

export interface TextRankInput {
  /** The row's tsvector. */
  search: SQLWrapper;
  text: TextQuery;
  /** ts_rank_cd's weights {D, C, B, A}; Postgres's own when absent. */
  weights?: readonly [number, number, number, number];
}

export interface TextRank {
  /** Full-text rank over any word, a bonus for every word and a larger one for the phrase, plus name similarity. */
  score: SQL;
  /** Whether a row matches at all: it has one of the words, or a word one of them may stand for. */
  found: SQL;
}

/**
 * How well a row matches the query, all by its tsvector (so by the full-text index): the rank over any of the
 * words, 0.3 when every word is there, 0.4 for the phrase, and half the similarity of the best name-like term it has.
 */
export function textRank(input: TextRankInput): TextRank {
  const { words, query, terms } = input.text;
  const extra = terms.filter((t) => t.similarity < 1).map((t) => t.word);
  // websearch_to_tsquery never fails on user text; "or" between the words finds rows with any of them.
  const anyWord = sql`websearch_to_tsquery(${textSearchConfig}, ${[...words, ...extra].join(' or ')})`;
  const everyWord = sql`websearch_to_tsquery(${textSearchConfig}, ${query})`;
  const phrase = sql`phraseto_tsquery(${textSearchConfig}, ${query})`;
  const termScore = terms.length
    ? sql`greatest(${sql.join(
        terms.map((t) => sql`case when ${input.search} @@ plainto_tsquery(${textSearchConfig}, ${t.word}) then ${t.similarity * 0.5}::float8 else 0 end`),
        sql`, `,
      )})`
    : sql`0`;
  const weights = input.weights ? sql`${sql.raw(`'{${input.weights.join(',')}}'::float4[]`)}, ` : sql``;
  const score = sql`(
    ts_rank_cd(${weights}${input.search}, ${anyWord}, 32)
    + case when ${input.search} @@ ${everyWord} then 0.3 else 0 end
    + ${words.length > 1 ? sql`case when ${input.search} @@ ${phrase} then 0.4 else 0 end` : sql`0`}
    + ${termScore}
  )`;
  return { score, found: sql`${input.search} @@ ${anyWord}` };
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
