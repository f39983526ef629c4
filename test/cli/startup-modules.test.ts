// What `parlor start` loads as it starts: every module it holds stays in its memory for as long as it
// runs. Read in a Node process of its own, from its ES module loader (a resolve hook) and CommonJS's require cache.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
let dir: string;
let loaded: { modules: string[]; required: string[] };

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-modules-'));
  const out = path.join(dir, 'modules.txt');
  await fs.writeFile(
    path.join(dir, 'hooks.mjs'),
    `import fs from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  fs.appendFileSync(out, resolved.url + '\\n');
  return resolved;
}
`,
  );
  await fs.writeFile(
    path.join(dir, 'register.mjs'),
    `import { register } from 'node:module';
register('./hooks.mjs', import.meta.url, { data: { out: ${JSON.stringify(out)} } });
`,
  );
  // `parlor start` and what it loads as it starts with a Telegram bot and an OpenAI-compatible model.
  const script = `
for (const file of ['src/cli/start.ts', 'connectors/telegram/index.ts', 'src/llm/openai.ts']) await import(${JSON.stringify(root)} + file);
const { createRequire } = await import('node:module');
console.log(JSON.stringify(Object.keys(createRequire(process.cwd() + '/').cache)));`;
  const child = await execa(process.execPath, ['--import', 'tsx', '--import', path.join(dir, 'register.mjs'), '--input-type=module', '-e', script], { cwd: root });
  loaded = { modules: (await fs.readFile(out, 'utf8')).split('\n').filter(Boolean), required: JSON.parse(child.stdout.trim().split('\n').pop()!) as string[] };
}, 60_000);

afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

const packageOf = (file: string) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];

it('reads what it loads (its ES modules and the CommonJS ones they require)', () => {
  expect(loaded.modules.map(packageOf)).toContain('pg-boss');
  expect(loaded.required.map(packageOf)).toContain('cron-parser');
});

it('holds one copy of luxon: the CommonJS build cron-parser requires, which its own tools use too', () => {
  expect(loaded.required.filter((file) => packageOf(file) === 'luxon')).toEqual([expect.stringMatching(/luxon\/build\/node\/luxon\.js$/)]);
  expect(loaded.modules.filter((url) => packageOf(url) === 'luxon')).toEqual([]);
});

it("holds undici's Agent and request, not the rest of undici", () => {
  const undici = loaded.required.filter((file) => packageOf(file) === 'undici');
  expect(undici).toContainEqual(expect.stringMatching(/undici\/lib\/dispatcher\/agent\.js$/));
  expect(undici).toContainEqual(expect.stringMatching(/undici\/lib\/api\/api-request\.js$/));
  expect(undici.filter((file) => /undici\/(index\.js|lib\/web\/)/.test(file))).toEqual([]);
});

it('loads execa with the first command the shell tools or grep run, not at start', () => {
  expect(loaded.modules.filter((url) => packageOf(url) === 'execa')).toEqual([]);
});
