// What personas are given to read (knowledge_ingest): documents cut into chunks that recall searches beside the
// memories. A small document is stored in the tool call; a large one by a job, which reads the workspace file again
// through the same rules the file tools keep, and says in the source's row how it went.
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import type { Database } from '#src/db/client.ts';
import { knowledgeSourcesOf, markSourceFailed, markSourceIngesting, replaceSourceChunks, type KnowledgeSourceRow } from '#src/db/knowledge.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import { QUEUES, type KnowledgeIngestJobData } from '#src/jobs/queues.ts';
import { readWorkspaceFile } from '#src/tools/workspace-read.ts';
import { chunkText } from './chunks.ts';
import { documentText } from './document-text.ts';
import type { EmbeddingJobs } from './embedding-jobs.ts';

export type KnowledgeSource = Omit<KnowledgeSourceRow, 'persona'>;

export interface KnowledgeBase {
  /** Cuts `text` into chunks and stores them as `source`, replacing what it had; how many chunks. */
  ingestText(persona: string, source: string, text: string, path?: string): Promise<{ chunks: number }>;
  /** Marks `source` as ingesting and leaves the reading of the workspace file to a job. */
  ingestLater(persona: string, source: string, path: string): Promise<void>;
  /** The persona's sources, by name. */
  sources(persona: string): Promise<KnowledgeSource[]>;
  /** Creates the queue, and with `worker` starts ingesting. */
  start(options: { worker: boolean }): Promise<void>;
  stop(): Promise<void>;
}

export interface IngestRetry {
  limit: number;
  delaySeconds: number;
}

export function createKnowledgeBase(deps: {
  database: Pick<Database, 'db'>;
  jobs: JobSystem;
  personas: () => readonly Persona[];
  /** Chunks are embedded after they are stored, when an embedding endpoint is configured. */
  embeddings?: EmbeddingJobs;
  log: Logger;
  retry?: IngestRetry;
  pollSeconds?: number;
}): KnowledgeBase {
  const { db } = deps.database;
  const { boss } = deps.jobs;
  const retry = deps.retry ?? { limit: 3, delaySeconds: 10 };
  let working = false;

  async function store(persona: string, source: string, text: string, path: string | null): Promise<number> {
    const chunks = chunkText(text);
    await replaceSourceChunks(db, { persona, source, path, chunks }, deps.embeddings && ((tx, ids) => deps.embeddings!.enqueue('knowledge_chunks', ids, tx)));
    return chunks.length;
  }

  /** Reads and stores the file: its number of chunks, or undefined when the persona is gone. */
  async function ingestFile(job: KnowledgeIngestJobData): Promise<number | undefined> {
    const persona = deps.personas().find((p) => p.name === job.persona);
    if (!persona) return undefined;
    const { bytes } = await readWorkspaceFile(persona, job.path, { personaDirs: deps.personas().map((p) => p.dir) });
    return store(job.persona, job.source, await documentText(job.path, bytes), job.path);
  }

  return {
    ingestText: async (persona, source, text, path) => ({ chunks: await store(persona, source, text, path ?? null) }),
    async ingestLater(persona, source, path) {
      await db.transaction(async (tx) => {
        await markSourceIngesting(tx, { persona, source, path });
        await deps.jobs.send(QUEUES.knowledgeIngest, { persona, source, path } satisfies KnowledgeIngestJobData, { tx });
      });
    },
    sources: async (persona) => (await knowledgeSourcesOf(db, persona)).map(({ persona: _persona, ...row }) => row),
    async start({ worker }) {
      if (!(await boss.getQueue(QUEUES.knowledgeIngest))) {
        await boss.createQueue(QUEUES.knowledgeIngest, {
          retryLimit: retry.limit,
          retryDelay: retry.delaySeconds,
          retryBackoff: true,
          expireInSeconds: 1800,
          deleteAfterSeconds: 7 * 24 * 3600,
        });
      }
      if (!worker) return;
      working = true;
      await boss.work<KnowledgeIngestJobData>(
        QUEUES.knowledgeIngest,
        { batchSize: 1, pollingIntervalSeconds: deps.pollSeconds ?? 2 },
        async ([job]) => {
          const log = deps.log.child({ persona: job.data.persona, source: job.data.source });
          const final = job.retryCount >= retry.limit;
          // Every failure is retried (a file being written may be whole at the next attempt, the database may be
          // back); until the last, the row stays `ingesting` and says what went wrong.
          try {
            const chunks = await ingestFile(job.data);
            if (chunks === undefined) await markSourceFailed(db, job.data.persona, job.data.source, `the persona ${job.data.persona} no longer exists`, true);
            else log.info({ chunks }, 'knowledge source ingested');
          } catch (err) {
            log.warn({ err, final }, 'knowledge source could not be ingested');
            await markSourceFailed(db, job.data.persona, job.data.source, (err as Error).message, final).catch(() => {});
            throw err;
          }
        },
      );
    },
    async stop() {
      if (working) await boss.offWork(QUEUES.knowledgeIngest, { wait: true }).catch(() => {});
    },
  };
}
