// knowledge_ingest and recall over knowledge on the real database: Markdown and PDF files found again with their
// provenance, a re-ingest replacing the old chunks, a large file ingested by its job (and a failing one retried),
// and nothing of one persona's knowledge reaching another.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Persona } from '../../src/config/persona.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { QUEUES } from '../../src/jobs/queues.ts';
import { startMemoryService, type MemoryService } from '../../src/memory/service.ts';
import { MemoryRegistry } from '../../src/memory/store.ts';
import { createKnowledgeIngestTool } from '../../tools/knowledge-ingest.ts';
import { createMemoryTool } from '../../tools/memory.ts';
import { createRecallTool } from '../../tools/recall.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';
import { minimalPdf } from '../tools/pdf-fixture.ts';

let t: TestDatabase;
let jobs: JobSystem;
let service: MemoryService;
let root: string;
const personas: Persona[] = [];
const registry = new MemoryRegistry();
const ingest = createKnowledgeIngestTool({ memory: registry });
const recall = createRecallTool({ memory: registry, timezone: 'UTC' });
const memory = createMemoryTool({ memory: registry });
const as = (name: string) => makeToolContext({ persona: personas.find((p) => p.name === name) });

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-knowledge-'));
  for (const name of ['ada', 'bob']) {
    const dir = path.join(root, name);
    await fs.mkdir(path.join(dir, 'workspace'), { recursive: true });
    personas.push(makePersona({ name, dir, workspace: path.join(dir, 'workspace') }));
  }
  t = await createTestDatabase();
  jobs = await startJobSystem(t.database, pino({ level: 'silent' }));
  service = await startMemoryService({
    database: t.database,
    jobs,
    personas: () => personas,
    log: pino({ level: 'silent' }),
    worker: true,
    retry: { ingest: { limit: 3, delaySeconds: 1 } },
    pollSeconds: 0.5,
  });
  registry.attach(service.store, service.knowledge);
});
afterAll(async () => {
  await service?.stop();
  await jobs?.stop();
  await t?.drop();
  await fs.rm(root, { recursive: true, force: true });
});
beforeEach(async () => {
  await t.database.db.execute(sql`delete from knowledge_chunks; delete from knowledge_sources; delete from memories`);
});

const write = (persona: string, file: string, content: string | Buffer) => fs.writeFile(path.join(root, persona, 'workspace', file), content);
const tags = (text: string) => [...text.matchAll(/\[(memory \d+|knowledge [^\]]+)\]/g)].map((m) => m[1]);
const sourceRow = async (persona: string, source: string) =>
  [...(await t.database.db.execute(sql`select state, error, chunks, path from knowledge_sources where persona = ${persona} and source = ${source}`))][0];

/** A Markdown handbook: one section per topic, each long enough to be a chunk of its own. */
const handbook = (holidays: string) =>
  [
    '# Staff handbook',
    '## Holidays',
    `${holidays} ${'Ask your lead a week ahead. '.repeat(10)}`,
    '## Expenses',
    `Receipts are reimbursed within a month when filed in the expenses portal. ${'Keep the paper copy. '.repeat(10)}`,
    '## Travel',
    `Trains are preferred to planes for trips under 600 km. ${'Book through the travel desk. '.repeat(10)}`,
  ].join('\n\n');

describe('knowledge_ingest', () => {
  it('ingests a Markdown file by sections, and recall finds the chunk with its provenance', async () => {
    await write('ada', 'handbook.md', handbook('Everyone has twenty-five days of paid leave.'));
    expect(await ingest.run({ source: 'handbook', path: 'handbook.md' }, as('ada'))).toBe(
      'ingested handbook: 3 chunks; recall finds them, tagged [knowledge handbook#<chunk>]',
    );
    const text = (await recall.run({ query: 'reimbursed receipts' }, as('ada'))) as string;
    expect(tags(text)).toEqual(['knowledge handbook#1']);
    expect(text).toMatch(/^1 knowledge chunk "reimbursed receipts":\n\n\[knowledge handbook#1\]\n## Expenses\n\nReceipts are reimbursed/);
    expect(await sourceRow('ada', 'handbook')).toEqual({ state: 'ready', error: null, chunks: 3, path: 'handbook.md' });
    expect(await recall.run({ source: 'knowledge' }, as('ada'))).toBe('1 knowledge source:\n- handbook (handbook.md): 3 chunks');
  });

  it('ingests a PDF, and recall finds its text beside a memory, each tagged', async () => {
    await write('ada', 'menu.pdf', minimalPdf(['Soup of the day: pumpkin with ginger', 'Dessert: lemon tart']));
    expect(await ingest.run({ source: 'menu', path: 'menu.pdf' }, as('ada'))).toMatch(/^ingested menu: 1 chunk;/);
    const saved = (await memory.run({ action: 'write', content: 'Sam hates ginger in anything' }, as('ada'))) as string;
    const id = /\[memory (\d+)\]/.exec(saved)![1];
    const text = (await recall.run({ query: 'ginger' }, as('ada'))) as string;
    expect(tags(text).sort()).toEqual(['knowledge menu#0', `memory ${id}`]);
    expect(text).toMatch(/^1 memory and 1 knowledge chunk "ginger":/);
    expect(text).toContain('pumpkin with ginger');
    expect((await recall.run({ query: 'ginger', source: 'memories' }, as('ada'))) as string).not.toContain('[knowledge');
    expect(tags((await recall.run({ query: 'ginger', source: 'knowledge' }, as('ada'))) as string)).toEqual(['knowledge menu#0']);
  });

  it('replaces a source it ingests again: the old text is no longer found', async () => {
    await write('ada', 'handbook.md', handbook('Everyone has twenty-five days of paid leave.'));
    await ingest.run({ source: 'handbook', path: 'handbook.md' }, as('ada'));
    expect(tags((await recall.run({ query: 'twenty-five days' }, as('ada'))) as string)[0]).toBe('knowledge handbook#0');
    expect(await ingest.run({ source: 'handbook', text: 'Holidays: thirty days from next year.' }, as('ada'))).toMatch(/^ingested handbook: 1 chunk;/);
    expect(await recall.run({ query: 'twenty-five', source: 'knowledge' }, as('ada'))).toBe('no knowledge matches "twenty-five"');
    expect(tags((await recall.run({ query: 'thirty days' }, as('ada'))) as string)).toEqual(['knowledge handbook#0']);
    const [count] = await t.database.db.execute(sql`select count(*)::int as n from knowledge_chunks where persona = 'ada'`);
    expect(count).toEqual({ n: 1 });
  });

  it('ingests a large file in a job: the tool returns at once, and recall finds it when it is ready', async () => {
    const sections = Array.from({ length: 400 }, (_, i) => `## Entry ${i}\n\nItem ${i} is stored on shelf ${i * 7} in aisle ${i % 13}. ${'Handle with care. '.repeat(30)}`);
    sections[321] = '## Entry 321\n\nThe quokka figurine is kept in the vault.';
    await write('ada', 'inventory.md', sections.join('\n\n'));
    const started = Date.now();
    expect(await ingest.run({ source: 'inventory', path: 'inventory.md' }, as('ada'))).toBe('ingesting inventory in the background; recall finds it when it is ready');
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await sourceRow('ada', 'inventory'))?.state).toBe('ingesting');
    expect(await recall.run({ query: 'quokka' }, as('ada'))).toBe(
      'no memories or knowledge match "quokka"\n(still ingesting: inventory; recall finds it when ready)',
    );
    await until(async () => (await sourceRow('ada', 'inventory'))?.state === 'ready', 'the ingest job', 20_000);
    expect(await sourceRow('ada', 'inventory')).toEqual({ state: 'ready', error: null, chunks: 400, path: 'inventory.md' });
    expect(tags((await recall.run({ query: 'quokka figurine' }, as('ada'))) as string)).toEqual(['knowledge inventory#321']);
  });

  it('finds a misspelt name in a chunk, as in a memory', async () => {
    await ingest.run({ source: 'staff', text: 'The night shift is led by Wojciech Szczepański.' }, as('ada'));
    expect(tags((await recall.run({ query: 'Wojchiech' }, as('ada'))) as string)).toEqual(['knowledge staff#0']);
    expect(await recall.run({ query: 'Wojchiech' }, as('bob'))).toBe('no memories match "Wojchiech"');
  });

  it('ingests a long document while memories sharing its words are written, and every write lands', async () => {
    const words = Array.from({ length: 300 }, (_, i) => `term${String(i).padStart(3, '0')}`);
    const sections = Array.from({ length: 120 }, (_, i) => `## Part ${i}\n\n${words.slice((i * 7) % 250, ((i * 7) % 250) + 50).join(' ')}.`);
    await write('ada', 'glossary.md', sections.join('\n\n'));
    const writes = Array.from({ length: 20 }, (_, i) => memory.run({ action: 'write', content: [...words].reverse().slice(i * 10, i * 10 + 60).join(' ') }, as('ada')));
    const [ingested, ...saved] = await Promise.all([ingest.run({ source: 'glossary', path: 'glossary.md' }, as('ada')), ...writes]);
    expect(ingested).toMatch(/^ingested glossary: \d+ chunks;/);
    expect(saved.every((r) => /^saved \[memory \d+\]/.test(r as string))).toBe(true);
    const [count] = await t.database.db.execute(sql`select count(*)::int as n from recall_words where persona = 'ada' and word like 'term%'`);
    expect(count).toEqual({ n: 300 });
  });

  it('retries a failed ingest job, saying why in the source row meanwhile', async () => {
    // The file is not there when the job first reads it: the attempt fails, and the row says so while a retry is due.
    await service.knowledge.ingestLater('ada', 'logbook', 'logbook.md');
    const failed = await until(async () => {
      const row = await sourceRow('ada', 'logbook');
      return row?.error ? row : undefined;
    }, 'the failed attempt');
    expect(failed).toMatchObject({ state: 'ingesting', error: '"logbook.md" does not exist in the workspace' });
    await write('ada', 'logbook.md', `# Logbook\n\nThe lighthouse keeper noted calm seas.`);
    await until(async () => (await sourceRow('ada', 'logbook'))?.state === 'ready', 'the retry', 20_000);
    expect(await sourceRow('ada', 'logbook')).toEqual({ state: 'ready', error: null, chunks: 1, path: 'logbook.md' });
    expect(tags((await recall.run({ query: 'lighthouse keeper' }, as('ada'))) as string)).toEqual(['knowledge logbook#0']);
    const [job] = await t.database.db.execute(sql`select retry_count, state from pgboss.job where name = ${QUEUES.knowledgeIngest} and data->>'source' = 'logbook'`);
    expect(job).toMatchObject({ state: 'completed' });
    expect(Number((job as { retry_count: number }).retry_count)).toBeGreaterThan(0);
  });

  it('marks a source failed when no retry is left', async () => {
    await service.knowledge.ingestLater('ada', 'broken', 'broken.md');
    await until(async () => (await sourceRow('ada', 'broken'))?.state === 'failed', 'the last attempt', 25_000);
    expect(await recall.run({ source: 'knowledge' }, as('ada'))).toBe('1 knowledge source:\n- broken (broken.md): failed: "broken.md" does not exist in the workspace');
  }, 40_000);

  it("keeps each persona to its own knowledge, and refuses another persona's files", async () => {
    await write('ada', 'secret.md', 'The vault combination is 9-4-7.');
    await ingest.run({ source: 'secret', path: 'secret.md' }, as('ada'));
    expect(await recall.run({ query: 'vault combination' }, as('bob'))).toBe('no memories match "vault combination"');
    expect(await recall.run({ source: 'knowledge' }, as('bob'))).toBe('no knowledge yet: ingest a document with knowledge_ingest');
    expect(await ingest.run({ source: 'stolen', path: '../../ada/workspace/secret.md' }, as('bob'))).toMatch(/^error: .* is outside the workspace$/);
    // The same source name in two personas is two sources.
    await ingest.run({ source: 'secret', text: 'Bob keeps no secrets.' }, as('bob'));
    expect(tags((await recall.run({ query: 'vault combination' }, as('ada'))) as string)).toEqual(['knowledge secret#0']);
    expect(await recall.run({ query: 'vault combination' }, as('bob'))).toBe('no memories or knowledge match "vault combination"');
  });

  it('says what is wrong with its arguments', async () => {
    expect(await ingest.run({ source: 'x' }, as('ada'))).toBe('error: give either path (a file in your workspace) or text, not both');
    expect(await ingest.run({ source: 'x', text: 'a', path: 'b' }, as('ada'))).toBe('error: give either path (a file in your workspace) or text, not both');
    expect(await ingest.run({ source: '  ', text: 'a' }, as('ada'))).toBe('error: source is empty; give the document a short name');
    await write('ada', 'blob.bin', Buffer.from([0, 1, 2, 3]));
    expect(await ingest.run({ source: 'x', path: 'blob.bin' }, as('ada'))).toBe('error: "blob.bin" is a binary file, not text, Markdown or a PDF');
    expect(await ingest.run({ source: 'x', path: 'missing.md' }, as('ada'))).toBe('error: "missing.md" does not exist in the workspace');
  });
});
