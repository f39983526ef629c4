// What personas remember: their journal of memories (memory, recall) and what they know of each person they talk
// to (user_model_write, and the system prompt of that person's turns). Every call names the persona, and every
// query is scoped to it: no persona reads or changes another's.
import type { Database } from '#src/db/client.ts';
import { extensionStates } from '#src/db/extensions.ts';
import { deleteMemory, insertMemory, searchMemories, updateMemory, type MemoryRow } from '#src/db/memories.ts';
import { upsertUserModel, userModelOf } from '#src/db/user-models.ts';

export type MemoryRecord = Omit<MemoryRow, 'persona'>;

export interface RecalledMemory extends MemoryRecord {
  score: number;
}

export interface UserModelEntry {
  dimension: string;
  content: string;
  /** 0..1. */
  confidence: number;
  updatedAt: Date;
}

export interface RecallRequest {
  query?: string;
  category?: string;
  /** Written in [from, to). */
  from?: Date;
  to?: Date;
  limit: number;
}

export interface MemoryStore {
  write(persona: string, memory: { category: string; content: string; importance: number }): Promise<MemoryRecord>;
  /** Undefined when the persona has no memory by that id. */
  update(persona: string, id: number, patch: Partial<Pick<MemoryRecord, 'category' | 'content' | 'importance'>>): Promise<MemoryRecord | undefined>;
  delete(persona: string, id: number): Promise<boolean>;
  recall(persona: string, request: RecallRequest): Promise<RecalledMemory[]>;
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

  attach(store: MemoryStore): void {
    this.attached = store;
  }

  get store(): MemoryStore | undefined {
    return this.attached;
  }
}

/** The store on Postgres. Trigram matching is used when the database has pg_trgm (looked up once). */
export function createMemoryStore(deps: { database: Pick<Database, 'db'> }): MemoryStore {
  const { db } = deps.database;
  let trigram: Promise<boolean> | undefined;
  const hasTrigram = () =>
    (trigram ??= extensionStates(db, ['pg_trgm']).then(
      (s) => s.pg_trgm.installed,
      () => ((trigram = undefined), false),
    ));
  const record = ({ persona: _persona, ...row }: MemoryRow): MemoryRecord => row;

  return {
    write: async (persona, memory) => record(await insertMemory(db, { persona, ...memory })),
    update: async (persona, id, patch) => {
      const row = await updateMemory(db, persona, id, patch);
      return row && record(row);
    },
    delete: (persona, id) => deleteMemory(db, persona, id),
    recall: async (persona, request) => {
      const rows = await searchMemories(db, { persona, ...request, trigram: await hasTrigram() });
      return rows.map(({ persona: _persona, ...row }) => row);
    },
    writeUserModel: (persona, user, entry) => upsertUserModel(db, { persona, userAddress: user, ...entry }),
    userModel: async (persona, user) =>
      (await userModelOf(db, persona, user)).map((r) => ({ dimension: r.dimension, content: r.content, confidence: r.confidence, updatedAt: r.updatedAt })),
  };
}
