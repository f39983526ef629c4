// How big the model request of a one-line DM is with 0, 50 and 500 custom tools installed (as folders in the
// persona's tools/ folder, through the real pipeline, against the fake LLM): custom tools are in the search tier,
// so the request should stay flat however many there are. Prints figures; asserts nothing.
import fs from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase } from './support.ts';

const COUNTS = (process.env.BENCH_TOOL_COUNTS ?? '0,50,500').split(',').map(Number);

/** A plausible tool: a name, a two-sentence description and three parameters. */
async function writeTool(dir: string, i: number): Promise<void> {
  const folder = path.join(dir, `tool-${i}`);
  await fs.mkdir(folder, { recursive: true });
  await fs.writeFile(
    path.join(folder, 'tool.json'),
    JSON.stringify({
      name: `service_${i}_lookup`,
      description: `Look up records in internal service number ${i} by id or by name. Returns at most twenty records as JSON lines.`,
      parameters: {
        type: 'object',
        additionalProperties: false,
        required: ['query'],
        properties: {
          query: { type: 'string', description: 'An id or a name.' },
          limit: { type: 'integer', minimum: 1, maximum: 20 },
          fields: { type: 'array', items: { type: 'string' } },
        },
      },
      command: `printf '%s' {{query}}`,
    }),
  );
}

async function main() {
  const database = await createBenchDatabase();
  const fake = await startFakeLlm();
  const rows: { count: number; bytes: number; system: number; tools: number }[] = [];
  for (const count of COUNTS) {
    const personasDir = await writePersonas({ bench: { soul: 'You are a benchmark persona who helps with everyday plans.', connectors: { users: ['chat:u1'] } } });
    for (let i = 0; i < count; i++) await writeTool(path.join(personasDir, 'bench', 'tools'), i);
    const settings = parseSettings({ DATABASE_URL: database.parlorUrl, LLM_BASE_URL: fake.openaiBaseUrl, LLM_MODEL: 'fake-model', PARLOR_PERSONAS_DIR: personasDir });
    const chat = createRecordingConnector('chat');
    const app = await startApp({ settings, log: pino({ level: 'warn' }), worker: true, connectors: () => [chat] });
    fake.reset();
    fake.script({ text: 'Hello!' });
    await chat.inject({ text: `hi (${count})` });
    await chat.waitForSent(1, 60_000);
    await app.waitForIdle('bench:chat:u1');
    const [request] = fake.requests;
    rows.push({ count, bytes: JSON.stringify(request.body).length, system: request.system.length, tools: request.toolNames.length });
    await app.stop();
    await fs.rm(personasDir, { recursive: true, force: true });
  }
  const base = rows[0]!.bytes;
  console.log('Model request of a one-line DM by custom tools installed (OpenAI wire format, built-in tools included)');
  for (const r of rows) {
    const change = ((r.bytes - base) / base) * 100;
    console.log(
      `  ${String(r.count).padStart(4)} custom tools: ${String(r.bytes).padStart(6)} bytes (${change >= 0 ? '+' : ''}${change.toFixed(1)} %), system prompt ${r.system} characters, ${r.tools} tool schemas`,
    );
  }
  await fake.close();
  await database.drop();
}

await main();
process.exit(0);
