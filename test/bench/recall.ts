// recall at the size of a persona people have talked to for years: 100,000 memories and 10,000 knowledge chunks in
// one persona (and a smaller second persona beside it, which its queries must not pay for), searched through the
// recall tool as a turn calls it, by text alone (no embedding endpoint). Prints figures; asserts nothing.
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { connectDatabase, migrateDatabase } from '../../src/db/client.ts';
import { extensionStates } from '../../src/db/extensions.ts';
import { startJobSystem } from '../../src/jobs/boss.ts';
import { startMemoryService } from '../../src/memory/service.ts';
import { MemoryRegistry } from '../../src/memory/store.ts';
import { createRecallTool } from '../../tools/recall.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { createBenchDatabase, percentile } from './support.ts';

const MEMORIES = Number(process.env.BENCH_RECALL_MEMORIES ?? 100_000);
const CHUNKS = Number(process.env.BENCH_RECALL_CHUNKS ?? 10_000);
// 200 (40 of each kind) by default.
const QUERIES = Number(process.env.BENCH_RECALL_QUERIES ?? 200);
const PERSONA = 'keeper';
const NEIGHBOUR = 'neighbour';
/** Memories are spread over this many days before today. */
const DAYS = 730;

const NAMES = (
  'Ada Alastair Amara Anselm Aurelia Bartholomew Beatrix Benedikt Bronwyn Caspian Cordelia Cyprian Dagny Desmond Dorothea ' +
  'Eamon Eleanora Emrys Esperanza Evander Fenella Florian Gwendolyn Hadrian Henrietta Ignatius Imogen Isidore Jessamy Joaquin ' +
  'Juniper Kasimir Katarina Leander Leocadia Lysander Magnolia Malachy Marguerite Maximilian Mireille Nathaniel Niamh Octavia ' +
  'Oisin Ottoline Peregrine Philippa Ptolemy Quentin Rosalind Rupert Saoirse Sebastian Seraphina Siobhan Tamsin Thaddeus ' +
  'Theodora Tobias Ulrike Valentina Wilhelmina Xavier Yevgenia Zachariah Zenobia Mikhael Krzysztof Guadalupe Ekaterina'
).split(' ');
const VERBS = 'visited called mentioned cooked painted repaired borrowed lost found planted booked cancelled recommended bought sold wrote'.split(' ');
const THINGS = (
  'the garden shed|a sourdough starter|the blue bicycle|her grandmother recipe|the quarterly budget|a train ticket to Lisbon|' +
  'the piano lessons|an old camera|the dentist appointment|a birthday present|the kitchen tap|a crossword puzzle|the rental car|' +
  'a pottery class|the tax return|the lemon tree|a chess set|the wedding invitation|a hiking map|the broken umbrella'
).split('|');
const PLACES = 'in Porto|at the market|near the river|at work|at the library|in the mountains|at the cafe|in Edinburgh|at home|on the ferry'.split('|');
const TAILS = (
  'and seemed pleased about it|but was worried about the cost|and wants to do it again next spring|though it rained all day|' +
  'and asked me to remind them in a week|which surprised everyone|and said it went better than expected|after a long week'
).split('|');
const CATEGORIES = 'note|person|preference|plan|event|health|work|travel'.split('|');
const WORDS = (
  'harvest lantern quarry meadow copper velvet orchard harbour glacier tundra lattice mosaic pigment solvent turbine ' +
  'ledger invoice tariff mortgage pension dividend vineyard terrace pantry cellar chimney gutter rafter hinge valve ' +
  'ferment yeast gluten pastry saffron cardamom fennel thyme basil oregano cumin paprika ginger clove nutmeg ' +
  'telescope nebula comet orbit eclipse asteroid satellite compass sextant lighthouse estuary delta lagoon reef ' +
  'sonnet ballad chorus sonata fugue etude overture libretto aria cadence melody rhythm tempo harmony octave ' +
  'the a of and to in for with on by from about after before during under over'
).split(' ');

/** A fixed sequence, so every run asks the same queries. */
function random(seed: number) {
  return () => ((seed = (Math.imul(seed ^ (seed >>> 15), 2654435761) + 0x6d2b79f5) >>> 0) / 2 ** 32);
}

/** A name with one slip of the keyboard: two letters swapped, or one dropped. */
function misspell(name: string, rand: () => number): string {
  const i = 1 + Math.floor(rand() * (name.length - 2));
  return rand() < 0.5 ? name.slice(0, i) + name[i + 1] + name[i] + name.slice(i + 2) : name.slice(0, i) + name.slice(i + 1);
}

const pick = <T>(list: readonly T[], rand: () => number) => list[Math.floor(rand() * list.length)];
const sqlList = (list: readonly string[]) => list.join('|');

async function fill(db: Awaited<ReturnType<typeof connectDatabase>>['db'], persona: string, memories: number, chunks: number) {
  // Sentences built in the database (generate_series), so the fill takes seconds, not minutes of round trips.
  await db.execute(sql`select setseed(0.16)`);
  await db.execute(sql`
    with w as (
      select string_to_array(${sqlList(NAMES)}, '|') as names, string_to_array(${sqlList(VERBS)}, '|') as verbs,
             string_to_array(${sqlList(THINGS)}, '|') as things, string_to_array(${sqlList(PLACES)}, '|') as places,
             string_to_array(${sqlList(TAILS)}, '|') as tails, string_to_array(${sqlList(CATEGORIES)}, '|') as categories
    )
    insert into memories (persona, category, content, importance, created_at, updated_at)
    select ${persona}, w.categories[1 + (g % array_length(w.categories, 1))],
           w.names[1 + floor(random() * array_length(w.names, 1))::int] || ' ' || w.verbs[1 + floor(random() * array_length(w.verbs, 1))::int] || ' ' ||
           w.things[1 + floor(random() * array_length(w.things, 1))::int] || ' ' || w.places[1 + floor(random() * array_length(w.places, 1))::int] ||
           case when random() < 0.5 then ' with ' || w.names[1 + floor(random() * array_length(w.names, 1))::int] else '' end || ' ' ||
           w.tails[1 + floor(random() * array_length(w.tails, 1))::int] || '.',
           1 + floor(random() * 10)::int, t, t
    from w, generate_series(1, ${memories}) g,
         lateral (select now() - (random() * ${DAYS}) * interval '1 day' + g * interval '0 microsecond' as t) ts`);
  // Documents of 100 chunks each, every chunk about 1,200 characters of words with a name now and then.
  await db.execute(sql`
    insert into knowledge_sources (persona, source, state, chunks)
    select ${persona}, 'document-' || s, 'ready', 100 from generate_series(0, ${Math.ceil(chunks / 100) - 1}) s`);
  await db.execute(sql`
    with w as (select string_to_array(${sqlList(WORDS)}, '|') as words, string_to_array(${sqlList(NAMES)}, '|') as names)
    insert into knowledge_chunks (persona, source, chunk, content)
    select ${persona}, 'document-' || (g / 100), g % 100, body.text
    from w, generate_series(0, ${chunks - 1}) g,
         lateral (
           select string_agg(case when random() < 0.04 then w.names[1 + floor(random() * array_length(w.names, 1))::int]
                                  else w.words[1 + floor(random() * array_length(w.words, 1))::int] end, ' ' order by i) || '.' as text
           from generate_series(1, 170 + g % 7) i
         ) body`);
}

async function main() {
  const database = await createBenchDatabase();
  const log = pino({ level: 'warn' });
  const app = await connectDatabase(database.parlorUrl);
  await migrateDatabase(app);
  const { pg_trgm } = await extensionStates(app.db, ['pg_trgm']);
  const jobs = await startJobSystem(app, log);
  const service = await startMemoryService({ database: app, jobs, personas: () => [], log, worker: false });
  const registry = new MemoryRegistry();
  registry.attach(service.store, service.knowledge);
  const recall = createRecallTool({ memory: registry, timezone: 'UTC' });
  const ctx = makeToolContext({ persona: makePersona({ name: PERSONA }) });

  const filling = performance.now();
  await fill(app.db, PERSONA, MEMORIES, CHUNKS);
  await fill(app.db, NEIGHBOUR, MEMORIES / 10, CHUNKS / 10);
  await app.db.execute(sql`analyze memories; analyze knowledge_chunks; analyze knowledge_sources`);
  const fillMs = performance.now() - filling;

  const rand = random(16);
  const today = new Date();
  const kinds: Record<string, () => Record<string, unknown>> = {
    word: () => ({ query: pick(rand() < 0.5 ? NAMES : [...VERBS, 'sourdough', 'bicycle', 'lantern', 'saffron', 'budget'], rand) }),
    phrase: () => ({ query: `"${pick(THINGS, rand).split(' ').slice(-2).join(' ')}" ${pick(PLACES, rand).split(' ').at(-1)}` }),
    misspelt: () => ({ query: misspell(pick(NAMES, rand), rand) }),
    empty: () => ({}),
    date: () => ({ date: new Date(today.getTime() - Math.floor(rand() * DAYS) * 86_400_000).toISOString().slice(0, 10) }),
  };
  const names = Object.keys(kinds);
  const samples = new Map<string, number[]>(names.map((k) => [k, []]));
  const found = new Map<string, number>(names.map((k) => [k, 0]));
  // A few queries first, to warm the connections and the plans (not counted).
  for (const name of names) await recall.run(kinds[name](), ctx);
  for (let i = 0; i < QUERIES; i++) {
    const kind = names[i % names.length];
    const args = kinds[kind]();
    const started = performance.now();
    const out = String(await recall.run(args, ctx));
    samples.get(kind)!.push(performance.now() - started);
    if (!out.startsWith('no ')) found.set(kind, found.get(kind)! + 1);
  }

  const f = (n: number) => n.toFixed(1).padStart(7);
  const line = (label: string, values: number[], hits?: number) => {
    const s = [...values].sort((a, b) => a - b);
    const answered = hits === undefined ? '' : `  ${hits}/${s.length} found something`;
    console.log(`  ${label.padEnd(10)} n=${String(s.length).padEnd(4)} p50 ${f(percentile(s, 50))} ms  p99 ${f(percentile(s, 99))} ms${answered}`);
  };
  console.log(
    `Recall over ${MEMORIES.toLocaleString('en')} memories and ${CHUNKS.toLocaleString('en')} knowledge chunks in one persona ` +
      `(+ ${(MEMORIES / 10).toLocaleString('en')} and ${(CHUNKS / 10).toLocaleString('en')} in another), through the recall tool, text ranking` +
      `${pg_trgm.installed ? ' with pg_trgm' : ' without pg_trgm'}, no embeddings`,
  );
  console.log(`  fill (both personas, with indexes and analyze): ${(fillMs / 1000).toFixed(1)} s`);
  for (const name of names) line(name, samples.get(name)!, found.get(name));
  line('overall', [...samples.values()].flat());

  await service.stop();
  await jobs.stop();
  await app.close();
  await database.drop();
}

await main();
process.exit(0);
