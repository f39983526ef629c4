// What personas remember: their journal of memories (memory, recall) and what they know of each person they talk
// to (user_model_write, and the system prompt of that person's turns). Every call names the persona, and every
// query is scoped to it: no persona reads or changes another's.
import type { Logger } from 'pino';
import type { Database } from '#src/db/client.ts';
import { deleteMemory, insertMemory, updateMemory, type MemoryRow } from '#src/db/memories.ts';
import { upsertUserModel, userModelOf } from '#src/db/user-models.ts';
import type { EmbeddingJobs } from './embedding-jobs.ts';
import type { EmbeddingClient } from './embeddings.ts';
import type { KnowledgeBase } from './knowledge.ts';
import { createRecaller, type RecallHit, type RecallRequest } from './recall.ts';

export type { RecallHit, RecallRequest } from './recall.ts';

export type MemoryRecord = Omit<MemoryRow, 'persona'>;

export interface UserModelEntry {
  dimension: string;
  content: string;
  /** 0..1. */
  confidence: number;
  updatedAt: Date;
}

export interface MemoryStore {
  write(persona: string, memory: { category: string; content: string; importance: number }): Promise<MemoryRecord>;
  /** Undefined when the persona has no memory by that id. */
  update(persona: string, id: number, patch: Partial<Pick<MemoryRecord, 'category' | 'content' | 'importance'>>): Promise<MemoryRecord | undefined>;
  delete(persona: string, id: number): Promise<boolean>;
  /** Memories and knowledge chunks, best first. */
  recall(persona: string, request: RecallRequest): Promise<RecallHit[]>;
  /** `user` is `connector:user id`. Whether the dimension is new for this person. */
  writeUserModel(persona: string, user: string, entry: { dimension: string; content: string; confidence: number }): Promise<{ created: boolean }>;
  /** The most confident and newest first. */
  userModel(persona: string, user: string): Promise<UserModelEntry[]>;
}

/**
 * The memory tools' way to the store: the tools are made before the database exists, and the store is attached
 * once it does (start-up). Until then the tools say memory is not available.
 */
export class MemoryRegistry {
  private attached?: MemoryStore;
  private attachedKnowledge?: KnowledgeBase;

  attach(store: MemoryStore, knowledge?: KnowledgeBase): void {
    this.attached = store;
    this.attachedKnowledge = knowledge;
  }

  get store(): MemoryStore | undefined {
    return this.attached;
  }

  /** Where knowledge_ingest stores documents (recall searches them through the store). */
  get knowledge(): KnowledgeBase | undefined {
    return this.attachedKnowledge;
  }
}

/**
 * The store on Postgres. With `embeddings`, every memory written or changed is embedded by a job enqueued in the
 * same transaction, and recall ranks by meaning as well (the client embeds its query).
 */
export function createMemoryStore(deps: {
  database: Pick<Database, 'db'>;
  embeddings?: { client: EmbeddingClient; jobs: EmbeddingJobs };
  log?: Logger;
}): MemoryStore {
  const { db } = deps.database;
  const record = ({ persona: _persona, ...row }: MemoryRow): MemoryRecord => row;
  const recaller = createRecaller({ database: deps.database, embeddings: deps.embeddings?.client, log: deps.log });
  const embedLater = deps.embeddings?.jobs;

  return {
    write: async (persona, memory) => {
      if (!embedLater) return record(await insertMemory(db, { persona, ...memory }));
      return db.transaction(async (tx) => {
        const row = await insertMemory(tx, { persona, ...memory });
        await embedLater.enqueue('memories', [row.id], tx);
        return record(row);
      });
    },
    update: async (persona, id, patch) => {
      if (!embedLater || patch.content === undefined) {
        const row = await updateMemory(db, persona, id, patch);
        return row && record(row);
      }
      return db.transaction(async (tx) => {
        const row = await updateMemory(tx, persona, id, patch);
        if (row) await embedLater.enqueue('memories', [row.id], tx);
        return row && record(row);
      });
    },
    delete: (persona, id) => deleteMemory(db, persona, id),
    recall: (persona, request) => recaller.recall(persona, request),
    writeUserModel: (persona, user, entry) => upsertUserModel(db, { persona, userAddress: user, ...entry }),
    userModel: async (persona, user) =>
      (await userModelOf(db, persona, user)).map((r) => ({ dimension: r.dimension, content: r.content, confidence: r.confidence, updatedAt: r.updatedAt })),
  };
}
