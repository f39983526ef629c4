// Recall on the real database: ranking by full-text search and trigram similarity, date listing in the persona's
// time zone, and nothing of one persona reaching another.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
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
  await t.database.db.execute(sql`delete from memories`);
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
