// Memory as the app runs it: the store (memories, user models, recall), the knowledge base and, with an embedding
// endpoint, the job that embeds what they hold.
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import type { Database } from '#src/db/client.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import { createEmbeddingJobs, type EmbeddingRetry } from './embedding-jobs.ts';
import { createEmbeddingClient, type EmbeddingClient, type EmbeddingSettings } from './embeddings.ts';
import { createKnowledgeBase, type IngestRetry, type KnowledgeBase } from './knowledge.ts';
import { createMemoryStore, type MemoryStore } from './store.ts';

export interface MemoryService {
  store: MemoryStore;
  knowledge: KnowledgeBase;
  stop(): Promise<void>;
}

export async function startMemoryService(deps: {
  database: Pick<Database, 'db'>;
  jobs: JobSystem;
  personas: () => readonly Persona[];
  /** The embedding endpoint; without it recall ranks by text. */
  embeddings?: EmbeddingSettings | EmbeddingClient;
  log: Logger;
  /** Run the ingest and embedding jobs in this process. */
  worker: boolean;
  /** Tests: faster retries and polls. */
  retry?: { embed?: EmbeddingRetry; ingest?: IngestRetry };
  pollSeconds?: number;
}): Promise<MemoryService> {
  const log = deps.log.child({ module: 'memory' });
  const client = deps.embeddings && ('embed' in deps.embeddings ? deps.embeddings : createEmbeddingClient(deps.embeddings));
  const embedJobs = client && createEmbeddingJobs({ database: deps.database, jobs: deps.jobs, client, log, retry: deps.retry?.embed, pollSeconds: deps.pollSeconds });
  const store = createMemoryStore({ database: deps.database, embeddings: client && embedJobs && { client, jobs: embedJobs }, log });
  const knowledge = createKnowledgeBase({
    database: deps.database,
    jobs: deps.jobs,
    personas: deps.personas,
    embeddings: embedJobs,
    log,
    retry: deps.retry?.ingest,
    pollSeconds: deps.pollSeconds,
  });
  await embedJobs?.start({ worker: deps.worker });
  await knowledge.start({ worker: deps.worker });
  return {
    store,
    knowledge,
    async stop() {
      await knowledge.stop();
      await embedJobs?.stop();
    },
  };
}
