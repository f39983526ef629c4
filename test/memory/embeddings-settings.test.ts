// The EMBEDDINGS_* settings: parsed (both or neither, the key kept secret), checked by parlor doctor, and used by
// the app: a memory written through the running app is embedded by its job and found by meaning.
import fs from 'node:fs/promises';
import { Writable } from 'node:stream';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSettings, settingSecrets } from '../../src/config/env.ts';
import { ConfigError } from '../../src/config/errors.ts';
import { runDoctor } from '../../src/doctor.ts';
import { MemoryRegistry } from '../../src/memory/store.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeEmbeddings, type FakeEmbeddings } from '../support/fake-embeddings.ts';
import { startHarness, writePersonas } from '../support/harness.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';

let fake: FakeEmbeddings;
beforeAll(async () => {
  fake = await startFakeEmbeddings();
});
afterAll(async () => {
  await fake?.close();
});

describe('EMBEDDINGS_* settings', () => {
  it('reads the endpoint, model and key, and keeps the key among the secrets', () => {
    const settings = parseSettings({ EMBEDDINGS_BASE_URL: 'http://localhost:11434/v1/', EMBEDDINGS_MODEL: 'nomic-embed-text', EMBEDDINGS_API_KEY: 'emb-secret-1' });
    expect(settings.embeddings).toEqual({ baseUrl: 'http://localhost:11434/v1', model: 'nomic-embed-text', apiKey: 'emb-secret-1' });
    expect(settingSecrets(settings)).toContain('emb-secret-1');
    expect(parseSettings({}).embeddings).toBeUndefined();
  });

  it('refuses half a configuration, naming what is missing', () => {
    const message = (env: Record<string, string>) => {
      try {
        parseSettings(env);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error('expected a ConfigError');
    };
    expect(message({ EMBEDDINGS_MODEL: 'm' })).toMatch(/^EMBEDDINGS_MODEL is set but EMBEDDINGS_BASE_URL is not/);
    expect(message({ EMBEDDINGS_BASE_URL: 'http://localhost:1/v1' })).toMatch(/^EMBEDDINGS_BASE_URL is set but EMBEDDINGS_MODEL is not/);
    expect(message({ EMBEDDINGS_API_KEY: 'k' })).toMatch(/^EMBEDDINGS_API_KEY is set but EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL are not/);
    expect(message({ EMBEDDINGS_BASE_URL: 'localhost:11434', EMBEDDINGS_MODEL: 'm' })).toMatch(/^EMBEDDINGS_BASE_URL=localhost:11434 is not a URL/);
  });
});

describe('doctor', () => {
  let t: TestDatabase;
  let personasDir: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    personasDir = await writePersonas({ testy: {} });
  });
  afterAll(async () => {
    await t?.drop();
    await fs.rm(personasDir, { recursive: true, force: true });
  });

  async function embeddingsLine(env: Record<string, string>): Promise<string | undefined> {
    let out = '';
    const stream = new Writable({ write: (chunk, _enc, done) => ((out += String(chunk)), done()) });
    const settings = parseSettings({ DATABASE_URL: t.url, LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', PARLOR_PERSONAS_DIR: personasDir, ...env });
    await runDoctor(settings, stream);
    return out.split('\n').find((l) => l.includes(' embeddings: '));
  }

  it('says whether embeddings are configured, and whether the endpoint embeds', async () => {
    expect(await embeddingsLine({})).toBe('✓ embeddings: not configured: recall ranks by words (set EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL to rank by meaning too)');
    expect(await embeddingsLine({ EMBEDDINGS_BASE_URL: fake.baseUrl, EMBEDDINGS_MODEL: 'fake-concepts' })).toBe(
      `✓ embeddings: fake-concepts at ${fake.baseUrl} embeds (256 dimensions)`,
    );
    fake.failures = { remaining: 1, status: 401 };
    expect(await embeddingsLine({ EMBEDDINGS_BASE_URL: fake.baseUrl, EMBEDDINGS_MODEL: 'fake-concepts' })).toMatch(
      /^✗ embeddings: .* answered HTTP 401.*; check EMBEDDINGS_API_KEY \(until then recall ranks by words\)$/,
    );
  });
});

describe('the app', () => {
  it('embeds what a persona remembers through the endpoint the settings name, and recall finds it by meaning', async () => {
    const memory = new MemoryRegistry();
    const tools = createBuiltinTools({ timezone: 'UTC', memory });
    const h = await startHarness({ env: { EMBEDDINGS_BASE_URL: fake.baseUrl, EMBEDDINGS_MODEL: 'fake-concepts' }, app: { tools, memory } });
    try {
      const ctx = makeToolContext({ persona: makePersona({ name: 'testy' }) });
      const run = (name: string, args: object) => tools.find((tool) => tool.name === name)!.run(args as never, ctx);
      const saved = String(await run('memory', { action: 'write', content: 'The automobile died on the motorway' }));
      const id = Number(/\[memory (\d+)\]/.exec(saved)![1]);
      await until(async () => (await h.query<{ n: number }>(sql`select count(*)::int as n from memories where id = ${id} and embedding_model = 'fake-concepts'`))[0].n === 1, 'the embedding');
      expect(String(await run('recall', { query: 'car broke down' }))).toContain(`[memory ${id}]`);
    } finally {
      await h.stop();
    }
  });
});
