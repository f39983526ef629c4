// pgvector, where the database has it: embeddings are stored as real[] (so a database without the extension keeps
// them too) and cast to vector(n) to be searched, with an HNSW index made once the dimension is known.
import { sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { Queryable } from './client.ts';

/** pgvector's HNSW index takes vectors of at most this many dimensions; past it the search scans. */
const HNSW_MAX_DIMENSIONS = 2000;

/** Cosine distance between a real[] column and `vector`, written as the HNSW index's expression is. */
export function cosineDistance(column: SQLWrapper, vector: readonly number[]): SQL {
  // The dimension is a literal, so the planner can match the partial index (a parameter would hide it).
  const type = sql.raw(`vector(${vector.length})`);
  return sql`(${column}::${type} <=> ${`[${vector.join(',')}]`}::${type})`;
}

/** Rows whose embedding has `dimensions` (the index's predicate; other models' rows are left out). */
export function hasDimensions(column: SQLWrapper, dimensions: number): SQL {
  return sql`array_length(${column}, 1) = ${sql.raw(String(dimensions))}`;
}

/**
 * Creates the HNSW index on `table.embedding` for this dimension, if it is missing: concurrently, so writes go on
 * meanwhile. Only for the tables that have an embedding column.
 */
export async function ensureHnswIndex(db: Queryable, table: 'memories' | 'knowledge_chunks', dimensions: number): Promise<void> {
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > HNSW_MAX_DIMENSIONS) return;
  await db.execute(
    sql.raw(
      `create index concurrently if not exists ${table}_embedding_hnsw_${dimensions} on ${table} ` +
        `using hnsw ((embedding::vector(${dimensions})) vector_cosine_ops) where array_length(embedding, 1) = ${dimensions}`,
    ),
  );
}
