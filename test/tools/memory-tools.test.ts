// The memory and user_model_write tools on the real database: ids that update and delete, clear errors, and
// nothing of one persona (or one person) reaching another.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryStore, MemoryRegistry, type MemoryStore } from '../../src/memory/store.ts';
import type { Origin } from '../../src/turns.ts';
import { createMemoryTool } from '../../tools/memory.ts';
import { createRecallTool } from '../../tools/recall.ts';
import { createUserModelWriteTool } from '../../tools/user-model-write.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

let t: TestDatabase;
let store: MemoryStore;
const registry = new MemoryRegistry();
const memory = createMemoryTool({ memory: registry });
const recall = createRecallTool({ memory: registry, timezone: 'UTC' });
const userModelWrite = createUserModelWriteTool({ memory: registry });
const dm = (sender: string): Origin => ({ connector: 'telegram', chat: sender.split(':')[1], chatType: 'dm', sender });
const as = (name: string, options: Parameters<typeof makeToolContext>[0] = {}) => makeToolContext({ persona: makePersona({ name }), ...options });

beforeAll(async () => {
  t = await createTestDatabase();
  store = createMemoryStore({ database: t.database });
});
afterAll(async () => {
  await t?.drop();
});

describe('memory', () => {
  it('says memory is not available until the store is attached', async () => {
    expect(await memory.run({ action: 'write', content: 'x' }, as('ada'))).toBe('error: memory is not available here (no database)');
    registry.attach(store);
  });

  it('writes, updates and deletes by the id it returned, scoped to the persona', async () => {
    const saved = (await memory.run({ action: 'write', content: 'Sam lives in Porto', category: ' People ', importance: 6 }, as('ada'))) as string;
    const id = Number(/^saved \[memory (\d+)\] \(people, importance 6\)$/.exec(saved)?.[1]);
    expect(id).toBeGreaterThan(0);

    // Another persona cannot see, change or delete it.
    expect(await memory.run({ action: 'update', id, content: 'Sam lives in Oslo' }, as('bob'))).toBe(
      `error: there is no memory ${id}; recall shows the ids of your memories`,
    );
    expect(await memory.run({ action: 'delete', id }, as('bob'))).toBe(`error: there is no memory ${id}; recall shows the ids of your memories`);

    expect(await memory.run({ action: 'update', id, content: 'Sam moved from Porto to Lisbon', importance: 9 }, as('ada'))).toBe(
      `updated [memory ${id}] (people, importance 9)`,
    );
    const rows = await t.database.db.execute(sql`select persona, category, content, importance, updated_at > created_at as touched from memories where id = ${id}`);
    expect([...rows]).toEqual([{ persona: 'ada', category: 'people', content: 'Sam moved from Porto to Lisbon', importance: 9, touched: true }]);
    expect(await recall.run({ query: 'Lisbon' }, as('ada'))).toContain(`[memory ${id}]`);

    expect(await memory.run({ action: 'delete', id }, as('ada'))).toBe(`deleted [memory ${id}]`);
    expect(await memory.run({ action: 'delete', id }, as('ada'))).toBe(`error: there is no memory ${id}; recall shows the ids of your memories`);
    expect(await recall.run({ query: 'Lisbon' }, as('ada'))).toBe('no memories match "Lisbon"');
  });

  it('says what is missing', async () => {
    expect(await memory.run({ action: 'write' }, as('ada'))).toBe('error: write needs content: what to remember');
    expect(await memory.run({ action: 'write', content: '   ' }, as('ada'))).toBe('error: write needs content: what to remember');
    expect(await memory.run({ action: 'update', content: 'x' }, as('ada'))).toBe('error: update needs the id of a memory (recall shows them as [memory <id>])');
    expect(await memory.run({ action: 'delete' }, as('ada'))).toBe('error: delete needs the id of a memory (recall shows them as [memory <id>])');
    const id = Number(/\d+/.exec((await memory.run({ action: 'write', content: 'kept' }, as('ada'))) as string)?.[0]);
    expect(await memory.run({ action: 'update', id }, as('ada'))).toBe('error: update needs content, category or importance: what to change');
    expect(await memory.run({ action: 'update', id, content: ' ' }, as('ada'))).toBe('error: content is empty; to forget a memory use delete');
    expect(await memory.run({ action: 'update', id: 999_999, content: 'x' }, as('ada'))).toBe('error: there is no memory 999999; recall shows the ids of your memories');
  });
});

describe('user_model_write', () => {
  it('upserts one row per persona, person and dimension', async () => {
    expect(await userModelWrite.run({ dimension: 'Food', content: 'vegetarian' }, as('ada', { origin: dm('telegram:1') }))).toBe('noted "food" for telegram:1');
    expect(await userModelWrite.run({ dimension: 'food', content: 'vegan since May', confidence: 0.9 }, as('ada', { origin: dm('telegram:1') }))).toBe(
      'updated "food" for telegram:1',
    );
    await userModelWrite.run({ dimension: 'food', content: 'eats everything' }, as('ada', { origin: dm('telegram:2') }));
    await userModelWrite.run({ dimension: 'food', content: 'likes sushi' }, as('bob', { origin: dm('telegram:1') }));
    await userModelWrite.run({ dimension: 'work style', content: 'terse', confidence: 0.4 }, as('ada', { origin: dm('telegram:1') }));

    expect(await store.userModel('ada', 'telegram:1')).toEqual([
      expect.objectContaining({ dimension: 'food', content: 'vegan since May', confidence: expect.closeTo(0.9, 5) }),
      expect.objectContaining({ dimension: 'work_style', content: 'terse', confidence: expect.closeTo(0.4, 5) }),
    ]);
    expect((await store.userModel('ada', 'telegram:2')).map((e) => e.content)).toEqual(['eats everything']);
    expect((await store.userModel('bob', 'telegram:1')).map((e) => e.content)).toEqual(['likes sushi']);
    expect(await store.userModel('carol', 'telegram:1')).toEqual([]);
  });

  it('refuses a turn without a person', async () => {
    const before = await t.database.db.execute(sql`select count(*)::int as n from user_models`);
    for (const ctx of [as('ada', { kind: 'cron' }), as('ada', { kind: 'heartbeat' }), as('ada', { kind: 'persona', origin: dm('telegram:1') })]) {
      expect(await userModelWrite.run({ dimension: 'x', content: 'y' }, ctx)).toBe(
        "error: there is no person in this turn (it was not started by someone's message), so there is nobody to note this about",
      );
    }
    expect(await t.database.db.execute(sql`select count(*)::int as n from user_models`)).toEqual(before);
  });
});
