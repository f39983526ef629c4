// Recall on the real database: ranking by full-text search, misspelt names found through the persona's own words by
// trigram similarity, listing without a query, date listing in the persona's time zone, and nothing of one persona
// reaching another.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connectDatabase } from '../../src/db/client.ts';
import { textQuery } from '../../src/db/text-rank.ts';
import { createMemoryStore, MemoryRegistry, type MemoryStore } from '../../src/memory/store.ts';
import { createMemoryTool } from '../../tools/memory.ts';
import { createRecallTool } from '../../tools/recall.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

let t: TestDatabase;
let store: MemoryStore;
const registry = new MemoryRegistry();
const TZ = 'Asia/Tokyo';
const memory = createMemoryTool({ memory: registry });
const recall = createRecallTool({ memory: registry, timezone: TZ });
const as = (name: string) => makeToolContext({ persona: makePersona({ name }) });

beforeAll(async () => {
  t = await createTestDatabase();
  store = createMemoryStore({ database: t.database });
  registry.attach(store);
});
afterAll(async () => {
  await t?.drop();
});
beforeEach(async () => {
  await t.database.db.execute(sql`delete from memories; delete from recall_words`);
});

/** Writes through the tool, as the model does; the id it was given. */
async function remember(persona: string, content: string, extra: { category?: string; importance?: number } = {}): Promise<number> {
  const result = await memory.run({ action: 'write', content, ...extra }, as(persona));
  const id = /^saved \[memory (\d+)\]/.exec(result as string)?.[1];
  if (!id) throw new Error(`not saved: ${String(result)}`);
  return Number(id);
}

/** The ids recall lists, in its order. */
async function recalled(persona: string, args: Parameters<typeof recall.run>[0]): Promise<number[]> {
  const text = (await recall.run(args, as(persona))) as string;
  return [...text.matchAll(/\[memory (\d+)\]/g)].map((m) => Number(m[1]));
}

describe('recall', () => {
  it('finds what was written, tagged with its id, date, category and importance', async () => {
    const id = await remember('ada', 'Sam is allergic to peanuts', { category: 'Health', importance: 8 });
    const text = (await recall.run({ query: 'peanuts' }, as('ada'))) as string;
    expect(text).toMatch(new RegExp(`^1 memory "peanuts":\\n\\n\\[memory ${id}\\] \\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2} · health · importance 8\\nSam is allergic to peanuts$`));
    expect(await recall.run({ query: 'volcano' }, as('ada'))).toBe('no memories match "volcano"');
  });

  it('ranks the exact phrase above memories that only mention its words, even more important ones', async () => {
    const passing = await remember('ada', 'Bought a blue vase with a lotus painted on it, for the hallway', { importance: 10 });
    const word = await remember('ada', 'The sky was blue all weekend', { importance: 10 });
    const phrase = await remember('ada', 'Dinner with Sam at the Blue Lotus, the Thai place on Main Street', { importance: 3 });
    expect(await recalled('ada', { query: 'blue lotus' })).toEqual([phrase, passing, word]);
  });

  it('finds a name spelt wrong by trigram similarity', async () => {
    const michael = await remember('ada', 'Michael moved to Lisbon in March');
    await remember('ada', 'The plumber comes on Tuesday');
    expect(await recalled('ada', { query: 'Mikhael' })).toEqual([michael]);
    expect(await recalled('ada', { query: 'where does Mikhael live now' })).toEqual([michael]);
  });

  it('finds a name with two letters swapped or one dropped, which trigram similarity alone misses', async () => {
    const alastair = await remember('ada', 'Alastair lent us his tent');
    const bronwyn = await remember('ada', 'Bronwyn starts at the bakery in June');
    await remember('ada', 'The plumber comes on Tuesday');
    expect(await recalled('ada', { query: 'Alsatair' })).toEqual([alastair]);
    expect(await recalled('ada', { query: 'Brownyn' })).toEqual([bronwyn]);
    expect(await recalled('ada', { query: 'Bronwn' })).toEqual([bronwyn]);
    expect(await recalled('ada', { query: 'Zephyrine' })).toEqual([]);
  });

  it('finds a misspelt name that a memory came to mention when it was edited', async () => {
    const id = await remember('ada', 'Dinner on Friday');
    expect(await recalled('ada', { query: 'Krzystof' })).toEqual([]);
    expect(await memory.run({ action: 'update', id, content: 'Dinner on Friday with Krzysztof' }, as('ada'))).toMatch(/^updated/);
    expect(await recalled('ada', { query: 'Krzystof' })).toEqual([id]);
  });

  it("a misspelt word stands only for words of the persona's own memories", async () => {
    await remember('bob', 'Krzysztof owes Bob ten pounds');
    const own = await remember('ada', 'Krzysiek brings the cake');
    const text = (await textQuery(t.database.db, 'ada', 'Krzystof', true))!;
    expect(text.terms.map((term) => term.word)).toEqual(['Krzystof', 'krzysiek']);
    expect(await recalled('ada', { query: 'Krzystof' })).toEqual([own]);
    expect(await recall.run({ query: 'Krzystof' }, as('carol'))).toBe('no memories match "Krzystof"');
  });

  it('searches a word the memories have as it is written, not as the words it resembles', async () => {
    const booked = await remember('ada', 'Booked the train to Leeds');
    await remember('ada', 'Cooked a risotto for everyone');
    expect(await recalled('ada', { query: 'booked' })).toEqual([booked]);
    expect(await recalled('ada', { query: 'bookde' })).toContain(booked);
  });

  it('without a query gives the same list as ranking every memory would, from the newest of each importance', async () => {
    const rand = (seed => () => ((seed = (seed * 16807) % 2147483647) / 2147483647))(7);
    for (let i = 0; i < 300; i++) {
      await t.database.db.execute(
        sql`insert into memories (persona, content, importance, created_at) values ('ada', ${`note ${i}`}, ${1 + Math.floor(rand() * 10)}, now() - ${`${Math.floor(rand() * 90 * 24 * 60)} minutes`}::interval)`,
      );
    }
    const every = await t.database.db.execute<{ id: string }>(
      sql`select id from memories where persona = 'ada' order by importance + 3.0 / (1 + extract(epoch from (now() - created_at)) / 86400.0 / 7) desc, id desc limit 25`,
    );
    expect(await recalled('ada', { limit: 25 })).toEqual([...every].map((r) => Number(r.id)));
  });

  it('plans each search for its own words, however often the same statement runs', async () => {
    // After five runs Postgres may switch a prepared statement to a generic plan, which does not know the words and
    // reads every memory of the persona (at 100,000 memories, 0.1 s became 0.5 s). The connection here is told to
    // prefer generic plans, and it has one connection so that its prepared statements can be looked at.
    const one = await connectDatabase(t.url, { max: 1 });
    try {
      await one.db.execute(sql`set plan_cache_mode = force_generic_plan`);
      const local = createMemoryStore({ database: one });
      await remember('ada', 'Krzysztof grows lemons in the garden');
      for (let i = 0; i < 8; i++) await local.recall('ada', { query: i % 2 ? 'lemon garden' : 'Krzystof', limit: 5 });
      const plans = await one.db.execute<{ generic_plans: string; custom_plans: string }>(
        sql`select generic_plans, custom_plans from pg_prepared_statements where statement like '%ts_rank_cd%' or statement like '%word_similarity%'`,
      );
      expect(plans.length).toBeGreaterThanOrEqual(2);
      expect(plans.every((p) => Number(p.generic_plans) === 0 && Number(p.custom_plans) > 0)).toBe(true);
    } finally {
      await one.close();
    }
  });

  it('ranks a word in the category above the same word in passing', async () => {
    const inContent = await remember('ada', 'Talked about travel plans for a while', { category: 'note' });
    const inCategory = await remember('ada', 'Prefers window seats and early flights', { category: 'travel' });
    expect(await recalled('ada', { query: 'travel' })).toEqual([inCategory, inContent]);
  });

  it('without a query lists the most important and recent first; category narrows', async () => {
    const old = await remember('ada', 'An old important thing', { importance: 9 });
    await t.database.db.execute(sql`update memories set created_at = now() - interval '400 days' where id = ${old}`);
    const trivial = await remember('ada', 'A trivial new thing', { importance: 1 });
    const fresh = await remember('ada', 'A fresh important thing', { importance: 9, category: 'work' });
    expect(await recalled('ada', {})).toEqual([fresh, old, trivial]);
    expect(await recalled('ada', { category: 'Work' })).toEqual([fresh]);
    expect(await recalled('ada', { limit: 1 })).toEqual([fresh]);
  });

  it("lists a day's memories in the persona's time zone, in the order they were written", async () => {
    const at = async (content: string, utc: string) => {
      const id = await remember('ada', content);
      await t.database.db.execute(sql`update memories set created_at = ${utc}::timestamptz where id = ${id}`);
      return id;
    };
    // 2024-05-01 in Tokyo is 2024-04-30T15:00Z .. 2024-05-01T15:00Z.
    await at('the evening before, Tokyo time', '2024-04-30T14:59:00Z');
    const morning = await at('just after midnight in Tokyo', '2024-04-30T15:00:00Z');
    const late = await at('late on the first of May, Tokyo time', '2024-05-01T14:59:00Z');
    await at('already the second of May in Tokyo', '2024-05-01T15:00:00Z');
    expect(await recalled('ada', { date: '2024-05-01' })).toEqual([morning, late]);
    const text = (await recall.run({ date: '2024-05-01' }, as('ada'))) as string;
    expect(text).toContain(`[memory ${morning}] 2024-05-01 00:00 · note`);
    expect(await recall.run({ date: '2024-05-03' }, as('ada'))).toBe('no memories on 2024-05-03');
    expect(await recall.run({ date: '2024-02-30' }, as('ada'))).toBe('error: "2024-02-30" is not a date; use YYYY-MM-DD');
  });

  it('keeps each persona to its own memories', async () => {
    await remember('ada', 'The safe code is 4321');
    const own = await remember('bob', 'Bob likes the safe by the window');
    expect(await recalled('bob', { query: 'safe code' })).toEqual([own]);
    expect(await recalled('bob', {})).toEqual([own]);
    expect(await recall.run({ query: 'code 4321' }, as('carol'))).toBe('no memories match "code 4321"');
  });

  it('bounds its answer, saying how many it left out', async () => {
    for (let i = 0; i < 12; i++) await remember('ada', `Long note ${i} about gardening: ${'tomatoes and basil '.repeat(200)}`);
    const text = (await recall.run({ query: 'gardening', limit: 12 }, as('ada'))) as string;
    expect(text.length).toBeLessThan(12_500);
    expect(text).toMatch(/\(\d+ more not shown: narrow the query or lower the limit\)$/);
    expect(text).toContain('… (cut)');
  });

  it('says there is no knowledge yet when asked for it', async () => {
    expect(await recall.run({ source: 'knowledge', query: 'x' }, as('ada'))).toMatch(/^no knowledge yet/);
  });

  it('ranks by full-text search alone in a database without pg_trgm', async () => {
    const bare = await createTestDatabase();
    try {
      await bare.database.db.execute(sql`drop extension pg_trgm cascade`);
      const local = new MemoryRegistry();
      local.attach(createMemoryStore({ database: bare.database }));
      const tools = { memory: createMemoryTool({ memory: local }), recall: createRecallTool({ memory: local, timezone: TZ }) };
      const saved = (await tools.memory.run({ action: 'write', content: 'Michael moved to Lisbon in March' }, as('ada'))) as string;
      const id = /\d+/.exec(saved)![0];
      expect(await tools.recall.run({ query: 'Lisbon' }, as('ada'))).toContain(`[memory ${id}]`);
      expect(await tools.recall.run({ query: 'Mikhael' }, as('ada'))).toBe('no memories match "Mikhael"');
    } finally {
      await bare.drop();
    }
  });
});
