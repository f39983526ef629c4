// recall with an embedding endpoint (a fake one on loopback whose vectors put synonyms together): a memory or a
// chunk that shares no word with the query is found by meaning, and not without embeddings; embedding happens in a
// job after the write (never in the turn), a failing endpoint is retried there, and recall falls back to text.
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { extensionStates } from '../../src/db/extensions.ts';
import { nearestMemories } from '../../src/db/memories.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { RECENT_EMBEDDED_ROWS } from '../../src/memory/recall.ts';
import { startMemoryService, type MemoryService } from '../../src/memory/service.ts';
import { createMemoryStore, MemoryRegistry } from '../../src/memory/store.ts';
import { createKnowledgeIngestTool } from '../../tools/knowledge-ingest.ts';
import { createMemoryTool } from '../../tools/memory.ts';
import { createRecallTool } from '../../tools/recall.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { DIMENSIONS, fakeEmbedding, startFakeEmbeddings, type FakeEmbeddings } from '../support/fake-embeddings.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';

let t: TestDatabase;
let jobs: JobSystem;
let fake: FakeEmbeddings;
let service: MemoryService;
const withVectors = new MemoryRegistry();
const textOnly = new MemoryRegistry();
const memory = createMemoryTool({ memory: withVectors });
const recall = createRecallTool({ memory: withVectors, timezone: 'UTC' });
const recallByText = createRecallTool({ memory: textOnly, timezone: 'UTC' });
const ingest = createKnowledgeIngestTool({ memory: withVectors });
const as = (name: string) => makeToolContext({ persona: makePersona({ name }) });
const tags = (text: unknown) => [...String(text).matchAll(/\[(memory \d+|knowledge [^\]]+)\]/g)].map((m) => m[1]);

beforeAll(async () => {
  t = await createTestDatabase();
  fake = await startFakeEmbeddings();
  jobs = await startJobSystem(t.database, pino({ level: 'silent' }));
  service = await startMemoryService({
    database: t.database,
    jobs,
    personas: () => [],
    embeddings: { baseUrl: fake.baseUrl, model: 'fake-concepts', apiKey: 'embed-key' },
    log: pino({ level: 'silent' }),
    worker: true,
    retry: { embed: { limit: 5, delaySeconds: 1, maxDelaySeconds: 2 } },
    pollSeconds: 0.5,
  });
  withVectors.attach(service.store, service.knowledge);
  textOnly.attach(createMemoryStore({ database: t.database }), service.knowledge);
});
afterAll(async () => {
  await service?.stop();
  await jobs?.stop();
  await fake?.close();
  await t?.drop();
});
beforeEach(async () => {
  await t.database.db.execute(sql`delete from memories; delete from knowledge_chunks; delete from knowledge_sources`);
  fake.delayMs = 0;
  fake.failures.remaining = 0;
});

async function remember(persona: string, content: string): Promise<number> {
  const saved = String(await memory.run({ action: 'write', content }, as(persona)));
  return Number(/^saved \[memory (\d+)\]/.exec(saved)![1]);
}

const embeddedModel = async (id: number) =>
  ([...(await t.database.db.execute(sql`select embedding_model from memories where id = ${id} and embedding is not null`))][0] as { embedding_model: string } | undefined)
    ?.embedding_model;

describe('semantic recall', () => {
  it('finds a memory that shares no word with the query, and not without embeddings', async () => {
    const car = await remember('ada', 'The automobile died on the motorway');
    const cat = await remember('ada', 'Sam adopted a tabby kitten');
    await until(async () => (await embeddedModel(car)) && (await embeddedModel(cat)), 'the embeddings');
    expect(await embeddedModel(car)).toBe('fake-concepts');
    expect(tags(await recall.run({ query: 'car broke down highway' }, as('ada')))).toEqual([`memory ${car}`]);
    expect(await recallByText.run({ query: 'car broke down highway' }, as('ada'))).toBe('no memories match "car broke down highway"');
    // The endpoint was asked with the model and key, the query embedded like the rows.
    expect(fake.requests.at(-1)).toMatchObject({ inputs: ['car broke down highway'], model: 'fake-concepts' });
  });

  it('finds a knowledge chunk by meaning, its chunks embedded in one batch after they were stored', async () => {
    const text = ['# Clinic', 'The physician says the flu passes in a week.', '# Garden', 'Water the roses at dawn.', '# Pets', 'The tabby naps.'].join('\n\n');
    expect(await ingest.run({ source: 'notes', text }, as('ada'))).toMatch(/^ingested notes: 3 chunks/);
    await until(async () => {
      const [row] = await t.database.db.execute(sql`select count(*)::int as n from knowledge_chunks where embedding is not null`);
      return (row as { n: number }).n === 3;
    }, 'the chunk embeddings');
    expect(fake.requests.filter((r) => r.inputs.some((i) => i.includes('# Clinic')))).toEqual([expect.objectContaining({ inputs: expect.arrayContaining([expect.stringContaining('# Pets')]) })]);
    expect(tags(await recall.run({ query: 'doctor sick' }, as('ada')))).toEqual(['knowledge notes#0']);
    expect(tags(await recall.run({ query: 'cat', source: 'knowledge' }, as('ada')))).toEqual(['knowledge notes#2']);
    expect(await recallByText.run({ query: 'doctor sick' }, as('ada'))).toBe('no memories or knowledge match "doctor sick"');
  });

  it('finds by meaning a memory older than the newest rows compared in the process only where the database has pgvector (by its HNSW index)', async () => {
    const car = await remember('ada', 'The automobile died on the motorway');
    await until(async () => (await embeddedModel(car)) !== undefined, 'the embedding');
    // Newer memories, embedded as the job would embed them, push it past the rows compared in the process.
    await t.database.db.execute(sql`
      insert into memories (persona, content, embedding, embedding_model, created_at)
      select 'ada', 'lunch note ' || g, ${`{${fakeEmbedding('lunch sandwich soup').join(',')}}`}::real[], 'fake-concepts', now() + g * interval '1 second'
      from generate_series(1, ${RECENT_EMBEDDED_ROWS + 20}) g`);
    const { vector } = await extensionStates(t.database.db, ['vector']);
    const found = tags(await recall.run({ query: 'car broke down highway' }, as('ada')));
    if (!vector.installed) {
      expect(found).toEqual([]);
      return;
    }
    expect(found).toEqual([`memory ${car}`]);
    // The index recall made for this dimension (in the background), and the nearest-rows query uses it.
    await until(async () => (await t.database.db.execute(sql`select 1 from pg_indexes where indexname = ${`memories_embedding_hnsw_${DIMENSIONS}`}`)).length === 1, 'the HNSW index');
    await t.database.db.execute(sql`analyze memories`);
    const nearest = nearestMemories(t.database.db, { persona: 'ada', model: 'fake-concepts' }, fakeEmbedding('car broke down highway'), 5);
    expect((await nearest)[0]).toMatchObject({ id: car });
    const { sql: text, params } = nearest.toSQL();
    const plan = await t.database.sql.begin(async (tx) => {
      await tx.unsafe('set local enable_seqscan = off');
      return tx.unsafe(`explain ${text}`, params as never[]);
    });
    expect(JSON.stringify(plan)).toContain(`memories_embedding_hnsw_${DIMENSIONS}`);
  });

  it('embeds after the tool has returned: a slow endpoint does not hold the turn', async () => {
    fake.delayMs = 2000;
    const before = fake.requests.length;
    const started = Date.now();
    const id = await remember('ada', 'My sedan conked out on the autobahn');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(fake.requests.length).toBe(before);
    expect(await embeddedModel(id)).toBeUndefined();
    await until(() => embeddedModel(id), 'the slow embedding', 15_000);
    expect(fake.requests.slice(before).map((r) => r.inputs)).toEqual([['My sedan conked out on the autobahn']]);
  });

  it('keeps a memory recallable by text while the endpoint fails, and retries its embedding', async () => {
    fake.failures = { remaining: 2, status: 503 };
    const id = await remember('ada', 'The automobile needs new tyres');
    // The query is embedded too and fails: recall ranks by text, and says nothing about it.
    const found = String(await recall.run({ query: 'tyres' }, as('ada')));
    expect(found).toMatch(new RegExp(`^1 memory "tyres":\\n\\n\\[memory ${id}\\] [^\\n]+\\nThe automobile needs new tyres$`));
    await until(() => embeddedModel(id), 'the retried embedding', 20_000);
    const embedJob = async () =>
      [...(await t.database.db.execute(sql`select state, retry_count from pgboss.job where name = ${QUEUES.embed} and data->'ids' @> ${JSON.stringify([id])}::jsonb`))];
    const [job] = await until(async () => {
      const rows = await embedJob();
      return rows.length === 1 && (rows[0] as { state: string }).state === 'completed' ? rows : undefined;
    }, 'the job to complete');
    expect(Number((job as { retry_count: number }).retry_count)).toBeGreaterThan(0);
    expect(tags(await recall.run({ query: 'car' }, as('ada')))).toEqual([`memory ${id}`]);
  });

  it('embeds a memory again when its content changes, forgetting what it meant before', async () => {
    const id = await remember('ada', 'The automobile died on the motorway');
    await until(() => embeddedModel(id), 'the first embedding');
    await memory.run({ action: 'update', id, content: 'Sam adopted a tabby kitten' }, as('ada'));
    expect(await embeddedModel(id)).toBeUndefined();
    await until(() => embeddedModel(id), 'the new embedding');
    expect(tags(await recall.run({ query: 'feline' }, as('ada')))).toEqual([`memory ${id}`]);
    expect(await recall.run({ query: 'car broke down' }, as('ada'))).toBe('no memories match "car broke down"');
  });

  it("never finds another persona's memories by meaning", async () => {
    const own = await remember('ada', 'Sam adopted a tabby kitten');
    const other = await remember('bob', 'The automobile died on the motorway');
    await until(async () => (await embeddedModel(own)) && (await embeddedModel(other)), 'the embeddings');
    expect(await recall.run({ query: 'car broke down' }, as('ada'))).toBe('no memories match "car broke down"');
    expect(tags(await recall.run({ query: 'car broke down' }, as('bob')))).toEqual([`memory ${other}`]);
  });
});
