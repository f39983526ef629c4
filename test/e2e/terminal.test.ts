// `parlor chat` at a real terminal (a pseudo-terminal from `script`): what a person at the keyboard sees and does.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { until } from '../support/until.ts';
import { writePersonas } from '../support/harness.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');

let fake: FakeLlm;
let db: TestDatabase;

beforeAll(async () => {
  fake = await startFakeLlm();
  db = await createTestDatabase();
});
afterAll(async () => {
  await fake?.close();
  await db?.drop();
});
beforeEach(() => fake.reset());

const env = () => ({
  PATH: process.env.PATH!,
  HOME: process.env.HOME ?? '/tmp',
  TERM: 'xterm',
  DATABASE_URL: db.url,
  PARLOR_PERSONAS_DIR: path.join(root, 'personas'),
  LLM_BASE_URL: fake.openaiBaseUrl,
  LLM_MODEL: 'fake-model',
});

/** `parlor chat` on a pseudo-terminal: keys are written to it, and what the screen shows is collected. */
function atTerminal(extraEnv: Record<string, string> = {}) {
  const child: ResultPromise = execa('script', ['-qfec', `exec node ${bin} chat`, '/dev/null'], { env: { ...env(), ...extraEnv }, extendEnv: false, stdin: 'pipe', reject: false, timeout: 60_000 });
  let screen = '';
  child.stdout!.on('data', (chunk: Buffer) => (screen += chunk.toString()));
  return {
    child,
    screen: () => screen.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').replace(/\r/g, ''),
    type: (keys: string) => child.stdin!.write(keys),
  };
}

describe('parlor chat at a terminal', () => {
  it('shows "thinking…" at once and draws Markdown (no ** or backticks on screen)', async () => {
    fake.script({ text: 'Here is **bold** and `code`:\n\n- one\n- two', delayMs: 1500 });
    const t = atTerminal();
    await until(() => t.screen().includes('you> '), 'the prompt', 30_000);
    t.type('show me\n');
    await until(() => t.screen().includes('thinking…'), '"thinking…"', 5_000);
    await until(() => t.screen().includes('Here is bold and code'), 'the drawn reply', 10_000);
    expect(t.screen()).not.toContain('**bold**');
    expect(t.screen()).toMatch(/\* one\n\s*\* two/);
    t.type('\x04');
    expect((await t.child).exitCode).toBe(0);
  });

  it('Ctrl-C once stops the running turn, twice quits, and the stopped turn never answers into the next session', async () => {
    fake.script({ text: 'the slow answer', delayMs: 8_000 });
    const t = atTerminal();
    await until(() => t.screen().includes('you> '), 'the prompt', 30_000);
    t.type('take your time\n');
    await until(() => t.screen().includes('thinking…'), '"thinking…"', 5_000);
    // Stopped while the model is answering (before that, the scripted answer would be left for the next session).
    await until(() => fake.requests.length === 1, 'the model call', 10_000);
    t.type('\x03');
    await until(() => t.screen().includes('Stopped.'), '"Stopped."', 10_000);
    expect(t.screen()).toContain('(Ctrl-C again quits)');
    t.type('\x03');
    await new Promise((r) => setTimeout(r, 300));
    t.type('\x03');
    expect((await t.child).exitCode).toBe(0);
    expect(t.screen()).not.toContain('the slow answer');

    // The next session, scripted: the stopped turn does not come back with its answer.
    fake.setDefault((req) => ({ text: `echo: ${req.lastUserText}` }));
    const next = await execa('node', [bin, 'chat'], { env: env(), extendEnv: false, input: 'hello again\n', reject: false, timeout: 60_000 });
    expect(next.stdout).toBe('echo: hello again');
  }, 90_000);

  it('piped input that ends while an approval waits says so, and the tool is denied', async () => {
    fake.script(
      { toolCalls: [{ name: 'shell_exec', arguments: { command: 'echo never' } }] },
      (req) => ({ text: `ran: ${req.body.messages.at(-1).content}` }),
    );
    const result = await execa('node', [bin, 'chat'], { env: env(), extendEnv: false, input: 'run it\n', reject: false, timeout: 60_000 });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('  ⌛ Expired: the input ended before anyone answered — shell_exec did not run');
    expect(result.stdout).toContain('ran: denied: shell_exec did not run (the input ended before anyone answered).');
    expect(result.stdout).not.toMatch(/restarted/);
  });

  it('a persona that streams writes its answer as it comes (the first words before the last are out)', async () => {
    const personas = await writePersonas({ streamer: { soul: 'You stream.', tools: { stream: true } } });
    const answer = Array.from({ length: 12 }, (_, i) => `w${i}`).join(' ');
    fake.script({ text: answer, chunks: 12, chunkDelayMs: 250 });
    const t = atTerminal({ PARLOR_PERSONAS_DIR: personas });
    await until(() => t.screen().includes('you> '), 'the prompt', 30_000);
    t.type('go\n');
    await until(() => t.screen().includes('w2'), 'the first words', 10_000);
    expect(t.screen()).not.toContain('w11');
    await until(() => t.screen().includes('w11'), 'the whole answer', 10_000);
    expect(t.screen()).toContain(answer);
    t.type('\x04');
    expect((await t.child).exitCode).toBe(0);
  });
});
