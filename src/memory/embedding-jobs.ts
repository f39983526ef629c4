// Embedding memories and knowledge chunks off the turn: a write enqueues a job in its own transaction, and a
// worker sends the texts to the endpoint in batches. A failed call fails its jobs, which pg-boss retries with
// back-off; the rows stay searchable by text meanwhile. Rows written before the endpoint was configured (or embedded
// by another model) are enqueued once per start of a worker, a page at a time.
import type { Logger } from 'pino';
import type { Database, Queryable } from '#src/db/client.ts';
import { chunksNotEmbedded, chunksToEmbed, storeChunkEmbeddings } from '#src/db/knowledge.ts';
import { memoriesNotEmbedded, memoriesToEmbed, storeMemoryEmbeddings } from '#src/db/memories.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import { QUEUES, type EmbedJobData } from '#src/jobs/queues.ts';
import type { EmbeddingClient } from './embeddings.ts';

/** Texts per request to the endpoint, and rows per job. */
export const EMBED_BATCH = 64;
/** Jobs a worker takes at once (their rows are embedded together, EMBED_BATCH at a time). */
const JOBS_PER_FETCH = 16;
/** Rows the backfill looks up and enqueues at a time. */
const BACKFILL_PAGE = EMBED_BATCH * 16;

export interface EmbeddingJobs {
  readonly model: string;
  /** Enqueues the embedding of these rows, with `tx` in that transaction (so it commits with the rows). */
  enqueue(table: EmbedJobData['table'], ids: readonly number[], tx?: Queryable): Promise<void>;
  /** Creates the queue, and with `worker` starts embedding and enqueues (in the background) every row not embedded by the model. */
  start(options: { worker: boolean }): Promise<void>;
  stop(): Promise<void>;
}

export interface EmbeddingRetry {
  limit: number;
  delaySeconds: number;
  maxDelaySeconds: number;
}

const DEFAULT_RETRY: EmbeddingRetry = { limit: 12, delaySeconds: 5, maxDelaySeconds: 900 };

export function createEmbeddingJobs(deps: {
  database: Pick<Database, 'db'>;
  jobs: JobSystem;
  client: EmbeddingClient;
  log: Logger;
  retry?: EmbeddingRetry;
  pollSeconds?: number;
}): EmbeddingJobs {
  const { db } = deps.database;
  const { boss } = deps.jobs;
  const retry = deps.retry ?? DEFAULT_RETRY;
  let working = false;
  let stopping = false;
  let backfill: Promise<void> | undefined;

  /**
   * Enqueues the rows with no embedding by this model, page by page. Another worker starting at the same time may
   * enqueue the same rows: the job skips rows already embedded, so that costs a lookup, not a request.
   */
  async function enqueueBackfill(): Promise<void> {
    const started = Date.now();
    const counts = { memories: 0, knowledge_chunks: 0 };
    for (const table of ['memories', 'knowledge_chunks'] as const) {
      const page = table === 'memories' ? memoriesNotEmbedded : chunksNotEmbedded;
      let after = 0;
      while (!stopping) {
        const ids = await page(db, deps.client.model, after, BACKFILL_PAGE);
        if (!ids.length) break;
        await db.transaction(async (tx) => {
          for (let start = 0; start < ids.length; start += EMBED_BATCH) {
            await deps.jobs.send(QUEUES.embed, { table, ids: ids.slice(start, start + EMBED_BATCH) } satisfies EmbedJobData, { tx });
          }
        });
        counts[table] += ids.length;
        after = ids.at(-1)!;
      }
    }
    if (counts.memories || counts.knowledge_chunks) deps.log.info({ ...counts, ms: Date.now() - started, model: deps.client.model }, 'enqueued the embedding of rows written without one');
  }

  async function embedRows(table: EmbedJobData['table'], ids: number[]): Promise<number> {
    const rows = table === 'memories' ? await memoriesToEmbed(db, ids, deps.client.model) : await chunksToEmbed(db, ids, deps.client.model);
    for (let start = 0; start < rows.length; start += EMBED_BATCH) {
      const batch = rows.slice(start, start + EMBED_BATCH);
      const vectors = await deps.client.embed(batch.map((r) => r.content));
      const embedded = batch.map((row, i) => ({ ...row, embedding: vectors[i] }));
      if (table === 'memories') await storeMemoryEmbeddings(db, deps.client.model, embedded);
      else await storeChunkEmbeddings(db, deps.client.model, embedded);
    }
    return rows.length;
  }

  return {
    model: deps.client.model,
    async enqueue(table, ids, tx) {
      for (let start = 0; start < ids.length; start += EMBED_BATCH) {
        await deps.jobs.send(QUEUES.embed, { table, ids: ids.slice(start, start + EMBED_BATCH) } satisfies EmbedJobData, { tx });
      }
    },
    async start({ worker }) {
      if (!(await boss.getQueue(QUEUES.embed))) {
        await boss.createQueue(QUEUES.embed, {
          retryLimit: retry.limit,
          retryDelay: retry.delaySeconds,
          retryBackoff: true,
          retryDelayMax: retry.maxDelaySeconds,
          expireInSeconds: 600,
          deleteAfterSeconds: 24 * 3600,
        });
      }
      if (!worker) return;
      working = true;
      await boss.work<EmbedJobData>(QUEUES.embed, { batchSize: JOBS_PER_FETCH, pollingIntervalSeconds: deps.pollSeconds ?? 2 }, async (jobs) => {
        const started = Date.now();
        let count = 0;
        try {
          for (const table of ['memories', 'knowledge_chunks'] as const) {
            const ids = jobs.filter((j) => j.data.table === table).flatMap((j) => j.data.ids);
            if (ids.length) count += await embedRows(table, ids);
          }
        } catch (err) {
          deps.log.warn({ err, jobs: jobs.length, model: deps.client.model }, 'embedding failed; the jobs are retried');
          throw err;
        }
        if (count) deps.log.debug({ rows: count, ms: Date.now() - started, model: deps.client.model }, 'embedded');
      });
      backfill = enqueueBackfill().catch((err: unknown) => {
        // The rows stay searchable by text; the next start tries again.
        if (!stopping) deps.log.warn({ err, model: deps.client.model }, 'the rows written without an embedding could not be enqueued');
      });
    },
    async stop() {
      stopping = true;
      await backfill;
      if (working) await boss.offWork(QUEUES.embed, { wait: true }).catch(() => {});
    },
  };
}
