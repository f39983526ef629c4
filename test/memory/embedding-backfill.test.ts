// Memories and chunks written before an embedding endpoint was configured (or embedded by another model) get an
// embedding once the memory service starts with one: it enqueues them itself, and each text is sent once.
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { EMBED_BATCH } from '../../src/memory/embedding-jobs.ts';
import { startMemoryService, type MemoryService } from '../../src/memory/service.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { DIMENSIONS, startFakeEmbeddings, type FakeEmbeddings } from '../support/fake-embeddings.ts';
import { until } from '../support/until.ts';

let t: TestDatabase;
let jobs: JobSystem;
let fake: FakeEmbeddings;
let service: MemoryService | undefined;

const OLD_MEMORIES = EMBED_BATCH * 20 + 7;

beforeAll(async () => {
  t = await createTestDatabase();
  fake = await startFakeEmbeddings();
  jobs = await startJobSystem(t.database, pino({ level: 'silent' }));
});
afterAll(async () => {
  await service?.stop();
  await jobs?.stop();
  await fake?.close();
  await t?.drop();
});

const query = async <T>(statement: ReturnType<typeof sql>) => (await t.database.db.execute(statement)) as unknown as T[];

describe('the embedding backfill', () => {
  it('embeds the rows written without an embedding, or by another model, after a start with embeddings', async () => {
    // Written while Parlor ran without an endpoint: no embeddings, and no jobs for them.
    await query(sql`
      insert into memories (persona, content)
      select case when g % 2 = 0 then 'ada' else 'bo' end, 'old memory number ' || g from generate_series(1, ${OLD_MEMORIES}) g`);
    await query(sql`insert into memories (persona, content, embedding, embedding_model) values ('ada', 'embedded by another model', '{1,0}', 'old-model')`);
    await query(sql`insert into memories (persona, content, embedding, embedding_model) values ('ada', 'already embedded', '{1,0}', 'fake-concepts')`);
    await query(sql`
      insert into knowledge_chunks (persona, source, chunk, content)
      select 'ada', 'handbook', g, 'old chunk number ' || g from generate_series(0, 9) g`);

    service = await startMemoryService({
      database: t.database,
      jobs,
      personas: () => [],
      embeddings: { baseUrl: fake.baseUrl, model: 'fake-concepts' },
      log: pino({ level: 'silent' }),
      worker: true,
      pollSeconds: 0.5,
    });

    const waiting = async () => {
      const [m] = await query<{ n: number }>(sql`select count(*)::int as n from memories where embedding_model is distinct from 'fake-concepts' or embedding is null`);
      const [k] = await query<{ n: number }>(sql`select count(*)::int as n from knowledge_chunks where embedding_model is distinct from 'fake-concepts' or embedding is null`);
      return m.n + k.n;
    };
    await until(async () => (await waiting()) === 0, 'every row embedded', 30_000);

    const [row] = await query<{ embedding: number[] }>(sql`select embedding from memories where content = 'embedded by another model'`);
    expect(row.embedding).toHaveLength(DIMENSIONS);
    const sent = fake.requests.flatMap((r) => r.inputs);
    // Every old text once; the row already embedded by this model not at all.
    expect(sent).toHaveLength(OLD_MEMORIES + 1 + 10);
    expect(new Set(sent).size).toBe(sent.length);
    expect(sent).not.toContain('already embedded');
    expect(sent).toContain('old memory number 1');
    expect(sent).toContain(`old memory number ${OLD_MEMORIES}`);
    expect(sent).toContain('old chunk number 9');
    // In jobs of a batch each, not one job per row nor one for them all.
    const [enqueued] = await query<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'embed'`);
    expect(enqueued.n).toBe(Math.ceil((OLD_MEMORIES + 1) / EMBED_BATCH) + 1);
  });

  it('enqueues nothing on the next start when every row has its embedding', async () => {
    await service!.stop();
    const before = fake.requests.length;
    const [jobsBefore] = await query<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'embed'`);
    service = await startMemoryService({
      database: t.database,
      jobs,
      personas: () => [],
      embeddings: { baseUrl: fake.baseUrl, model: 'fake-concepts' },
      log: pino({ level: 'silent' }),
      worker: true,
      pollSeconds: 0.5,
    });
    await service.stop();
    service = undefined;
    const [jobsAfter] = await query<{ n: number }>(sql`select count(*)::int as n from pgboss.job where name = 'embed'`);
    expect(jobsAfter.n).toBe(jobsBefore.n);
    expect(fake.requests.length).toBe(before);
  });
});
