// The `parlor` command as a user runs it: a child process, the fake LLM, real Postgres.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { TEST_PERSONA, writePersonas } from '../support/harness.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');

let fake: FakeLlm;
let db: TestDatabase;
let cwd: string;

beforeAll(async () => {
  fake = await startFakeLlm();
  db = await createTestDatabase();
  cwd = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-cli-'));
});
afterAll(async () => {
  await fake?.close();
  await db?.drop();
  await fs.rm(cwd, { recursive: true, force: true });
});
beforeEach(() => fake.reset());

/** Runs `parlor` with a clean environment: only what the test gives it. */
function parlor(args: string[], env: Record<string, string>, input?: string) {
  return execa('node', [bin, ...args], {
    cwd,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? cwd, ...env },
    extendEnv: false,
    input,
    reject: false,
    timeout: 60_000,
  });
}

const model = () => ({ LLM_BASE_URL: fake.openaiBaseUrl, LLM_MODEL: 'fake-model' });

describe('parlor chat', () => {
  it('answers piped lines through the whole pipeline, including a tool call round trip', async () => {
    fake.script(
      { toolCalls: [{ name: 'clock', arguments: { timezone: 'Europe/Berlin' } }] },
      (req) => ({ text: `The clock says: ${req.body.messages.at(-1).content.includes('Europe/Berlin') ? 'Berlin time' : '?'}` }),
      { text: 'Second answer.' },
    );
    const result = await parlor(['chat', '--persona', 'assistant'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') }, 'what time is it in Berlin?\nthanks\n');
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('The clock says: Berlin time\nSecond answer.');
    expect(fake.requests).toHaveLength(3);
    expect(fake.requests[1].body.messages.at(-1).role).toBe('tool');
    expect(fake.requests[0].system).toContain('You are Assistant');
  });

  it('asks before shell_exec with numbered choices, and a typed number answers', async () => {
    fake.script(
      { toolCalls: [{ name: 'shell_exec', arguments: { command: 'echo from-the-terminal' } }] },
      (req) => ({ text: `ran: ${req.body.messages.at(-1).content}` }),
    );
    const result = await parlor(['chat', '--persona', 'assistant'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') }, 'say something in the shell\n1\n');
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines.slice(0, 4)).toEqual(['🔐 assistant wants to run shell_exec', '```', 'echo from-the-terminal', '```']);
    expect(lines).toContain('  1) Allow once');
    expect(lines).toContain('  3) Deny');
    expect(lines.some((l) => /^ {2}✅ Allowed once by /.test(l))).toBe(true);
    expect(result.stdout).toContain('ran: exit=0\nfrom-the-terminal');
    expect(fake.requests).toHaveLength(2);
  });

  it('a persona made the README way (only SOUL.md) asks before shell_exec runs; "allow" in its tools.jsonc lets it run unasked, and doctor says so', async () => {
    const dir = await writePersonas({ coder: { soul: 'You write code.' } });
    fake.script({ toolCalls: [{ name: 'shell_exec', arguments: { command: 'id -un' } }] }, (req) => ({ text: `ran: ${req.body.messages.at(-1).content}` }));
    const asked = await parlor(['chat', '--persona', 'coder'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir }, 'shell: id -un\n3\n');
    expect(asked.stdout.split('\n').slice(0, 4)).toEqual(['🔐 coder wants to run shell_exec', '```', 'id -un', '```']);
    expect(asked.stdout).toContain('ran: denied: shell_exec did not run');
    expect(asked.stdout).not.toContain('exit=0');

    await fs.writeFile(path.join(dir, 'coder', 'tools.jsonc'), '{ "allow": ["shell_exec"] }');
    fake.script({ toolCalls: [{ name: 'shell_exec', arguments: { command: 'echo unasked' } }] }, (req) => ({ text: `ran: ${req.body.messages.at(-1).content}` }));
    const unasked = await parlor(['chat', '--persona', 'coder'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir }, 'shell: echo unasked\n');
    expect(unasked.stdout).toBe('ran: exit=0\nunasked');
    const doctor = await parlor(['doctor'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir });
    expect(doctor.stdout).toContain(`! approvals: persona coder runs shell_exec without asking (it is under "allow" in ${path.join(dir, 'coder', 'tools.jsonc')})`);
  }, 60_000); // Three processes, one after another.

  it('says sorry, without a stack trace, when the model endpoint is down', async () => {
    const result = await parlor(
      ['chat'],
      { LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', LLM_RETRY_SECONDS: '1', DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') },
      'hello?\n',
    );
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe("Sorry, I couldn't reach the model just now. Please try again in a moment.");
    expect(result.stdout + result.stderr).not.toMatch(/\n\s+at |ECONNREFUSED/);
  });

  it('refuses an unknown persona with one line', async () => {
    const result = await parlor(['chat', '--persona', 'nobody'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') }, 'hi\n');
    expect(result.exitCode).toBe(2);
    expect(result.stderr.trim()).toMatch(/^parlor: no persona named "nobody" in .*personas \(have: assistant\)$/);
  });
});

describe('the command line', () => {
  it('an unknown option is one line that points at the command\'s help, exit 2', async () => {
    const result = await parlor(['chat', '--bogus'], {});
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toBe("parlor chat: Unknown option '--bogus'; see parlor chat --help");
    const missing = await parlor(['start', '--role'], {});
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toBe("parlor start: Option '--role <value>' argument missing; see parlor start --help");
  });

  it('--version prints the version, and each command has its own --help', async () => {
    const pkg = JSON.parse(await fs.readFile(path.join(root, 'package.json'), 'utf8')) as { version: string };
    expect((await parlor(['--version'], {})).stdout).toBe(`parlor ${pkg.version}`);
    for (const [command, first] of [['start', 'Usage: parlor start [--role all|ingress|worker]'], ['chat', 'Usage: parlor chat [--persona NAME]'], ['migrate', 'Usage: parlor migrate'], ['doctor', 'Usage: parlor doctor [--persona NAME]']]) {
      const help = await parlor([command, '--help'], {});
      expect(help.exitCode).toBe(0);
      expect(help.stdout.split('\n')[0]).toBe(first);
    }
    expect((await parlor(['--help'], {})).stdout).toContain('parlor <command> --help');
  });

  it('runs as an executable of its own, and npm start gives node the flags its first line gives', async () => {
    const pkg = JSON.parse(await fs.readFile(path.join(root, 'package.json'), 'utf8')) as { version: string; scripts: { start: string } };
    const direct = await execa(bin, ['--version'], { reject: false });
    expect(direct.stdout).toBe(`parlor ${pkg.version}`);
    const [shebang] = (await fs.readFile(bin, 'utf8')).split('\n');
    const flags = /^#!\/usr\/bin\/env -S node((?: --[\w-]+=\S+)*)$/.exec(shebang)?.[1];
    expect(flags).toContain('--max-semi-space-size=');
    expect(flags).toContain('--heap-growing-percent=');
    expect(pkg.scripts.start).toBe(`node${flags} bin/parlor.js start`);
  });
});

describe('looking at what happened', () => {
  it('parlor conversations lists them with persona, connector and last activity; parlor log shows the transcript with tool calls folded', async () => {
    fake.script(
      { toolCalls: [{ name: 'clock', arguments: { timezone: 'Europe/Berlin' } }] },
      { text: 'It is late in Berlin.' },
    );
    const env = { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') };
    await parlor(['chat', '--persona', 'assistant'], env, 'what time is it in Berlin?\n');
    const list = await parlor(['conversations'], env);
    expect(list.exitCode).toBe(0);
    const row = list.stdout.split('\n').find((l) => l.startsWith('assistant:terminal:assistant'));
    expect(row).toMatch(/^assistant:terminal:assistant\s+assistant\s+terminal\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\s+\d+\s+\d+$/);

    const transcript = await parlor(['log', 'assistant:terminal:assistant', '--limit', '4'], env);
    expect(transcript.exitCode).toBe(0);
    const lines = transcript.stdout.split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d terminal:owner: what time is it in Berlin\?$/);
    expect(lines[1]).toMatch(/assistant: \(tool calls\)$/);
    expect(lines[2]).toMatch(/^\d\d:\d\d:\d\d {3}→ clock \{"timezone":"Europe\/Berlin"\}$/);
    expect(lines[3]).toMatch(/^\d\d:\d\d:\d\d {3}← clock: /);
    expect(lines[4]).toMatch(/assistant: It is late in Berlin\.$/);

    const unknown = await parlor(['log', 'nobody:here'], env);
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toBe('parlor: there is no conversation "nobody:here"; parlor conversations lists them');
  });
});

describe('logs', () => {
  it('PARLOR_LOG_FILE sends the logs to a file, as JSON lines, and the terminal stays quiet', async () => {
    const file = path.join(cwd, 'logs', 'parlor.log');
    const child = execa('node', [bin, 'start'], {
      cwd,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? cwd, ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas'), PARLOR_HTTP_PORT: '0', PARLOR_LOG_FILE: file },
      extendEnv: false,
      reject: false,
      timeout: 60_000,
    });
    const deadline = Date.now() + 30_000;
    let text = '';
    while (!text.includes('Parlor is running') && Date.now() < deadline) {
      text = await fs.readFile(file, 'utf8').catch(() => '');
      await new Promise((r) => setTimeout(r, 200));
    }
    child.kill('SIGINT');
    const result = await child;
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('');
    const lines = (await fs.readFile(file, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['Parlor is running; Ctrl-C stops it', 'shutting down']));
  });
});

describe('configuration errors', () => {
  it('with no model configured, start exits 2 naming the variables and an example', async () => {
    const result = await parlor(['start'], { DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('no model configured');
    expect(result.stderr).toContain('LLM_MODEL');
    expect(result.stderr).toContain('LLM_BASE_URL=http://localhost:11434/v1');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('a malformed persona file is named with its JSON path, exit 2', async () => {
    const dir = await writePersonas({ broken: { ...TEST_PERSONA, connectors: { channels: [{ connector: 'telegram', chat: '-100', mention: 'yes' }] } } });
    const result = await parlor(['start'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir });
    expect(result.exitCode).toBe(2);
    expect(result.stderr.trim()).toBe(`parlor: ${path.join(dir, 'broken', 'connectors.jsonc')}: /channels/0/mention must be boolean`);
  });

  it('a tool name typo in approve or deny stops start-up (and fails doctor) naming the file, the path and the nearest tool', async () => {
    const dir = await writePersonas({ typo: { connectors: { users: ['telegram:1'] }, tools: { deny: ['react'], approve: ['shell-exec'] } } });
    const file = path.join(dir, 'typo', 'tools.jsonc');
    const result = await parlor(['start'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir });
    expect(result.exitCode).toBe(2);
    expect(result.stderr.trim()).toMatch(new RegExp(`^parlor: ${file.replace(/[.]/g, '\\.')}: /approve/0 "shell-exec" is not a tool \\(did you mean "shell_exec"\\?\\); the tools are .*shell_exec`));
    const doctor = await parlor(['doctor'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir });
    expect(doctor.exitCode).toBe(1);
    expect(doctor.stdout).toContain(`✗ personas: ${file}: /approve/0 "shell-exec" is not a tool (did you mean "shell_exec"?)`);
    const denyTypo = await writePersonas({ typo: { connectors: { users: ['telegram:1'] }, tools: { deny: ['send_mesage'] } } });
    const denied = await parlor(['start'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: denyTypo });
    expect(denied.exitCode).toBe(2);
    expect(denied.stderr).toContain('/deny/0 "send_mesage" is not a tool (did you mean "send_message"?)');
  });

  it('an HTTP port in use is one line: another program, or another Parlor (then: add this one with --role worker)', async () => {
    const { createServer } = await import('node:http');
    const other = createServer((req, res) => res.end(req.url === '/healthz' ? JSON.stringify({ status: 'ok', personas: ['assistant'] }) : 'hi'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const port = (other.address() as { port: number }).port;
    const env = { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas'), PARLOR_HTTP_PORT: String(port) };
    const parlorThere = await parlor(['start'], env);
    expect(parlorThere.exitCode).toBe(2);
    expect(parlorThere.stderr.trim().split('\n').at(-1)).toBe(
      `parlor: another Parlor is already running on 127.0.0.1:${port} (PARLOR_HTTP_PORT); to add this process as a worker beside it, run parlor start --role worker, or set PARLOR_HTTP_PORT to a free port`,
    );
    expect(parlorThere.stderr).not.toMatch(/\n\s+at /);
    other.removeAllListeners('request');
    other.on('request', (_req, res) => res.end('not parlor'));
    const programThere = await parlor(['start'], env);
    expect(programThere.exitCode).toBe(2);
    expect(programThere.stderr.trim().split('\n').at(-1)).toBe(
      `parlor: PARLOR_HTTP_PORT=${port}: 127.0.0.1:${port} is already in use by another program; set PARLOR_HTTP_PORT to a free port (0 picks one)`,
    );
    await new Promise((resolve) => other.close(resolve));
  });

  it('an unreachable database is one clear line, exit 1', async () => {
    const result = await parlor(['start'], { ...model(), DATABASE_URL: 'postgres://parlor:secret@127.0.0.1:9/parlor', PARLOR_PERSONAS_DIR: path.join(root, 'personas') });
    expect(result.exitCode).toBe(1);
    expect(result.stderr.trim()).toMatch(/^parlor: cannot connect to the database at postgres:\/\/parlor:\*\*\*@127\.0\.0\.1:9\/parlor \(ECONNREFUSED.*\)\. Check DATABASE_URL, or unset it to use the embedded Postgres\.$/);
    expect(result.stderr).not.toContain('secret');
  });

  it('doctor reports what is wrong and how to fix it', async () => {
    const result = await parlor(['doctor'], { LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas'), TELEGRAM_BOT_TOKEN: '123:abc', TELEGRAM_API_ROOT: fake.origin });
    expect(result.exitCode).toBe(1);
    expect(result.stdout).toContain('✓ personas: 1');
    expect(result.stdout).toMatch(/✓ database: .*Postgres \d+/);
    expect(result.stdout).toMatch(/✗ model: cannot reach http:\/\/127\.0\.0\.1:9 .*check LLM_BASE_URL/);
    expect(result.stdout).toMatch(/✗ telegram: token refused/);
    const healthy = await parlor(['doctor'], { ...model(), DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') });
    expect(healthy.stdout).toContain('✓ model: openai fake-model');
    expect(healthy.stdout).toMatch(/✓ shell sandbox: bubblewrap \S+ \(/);
    expect(healthy.exitCode).toBe(0);
  });

  it('doctor does not call a 404 reachable: a base URL missing its /v1 is named with the fix, and a model the server does not serve is named', async () => {
    const { createServer } = await import('node:http');
    // Like Ollama: the API lives under /v1 only.
    const ollama = createServer((req, res) => {
      if (req.url === '/v1/models') return res.end(JSON.stringify({ object: 'list', data: [{ id: 'llama3.1' }, { id: 'qwen2.5' }] }));
      res.writeHead(404).end('404 page not found');
    });
    await new Promise<void>((resolve) => ollama.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(ollama.address() as { port: number }).port}`;
    const env = { DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') };
    const noV1 = await parlor(['doctor'], { ...env, LLM_BASE_URL: origin, LLM_MODEL: 'llama3.1' });
    expect(noV1.exitCode).toBe(1);
    expect(noV1.stdout).toContain(`✗ model: ${origin} has no API there (HTTP 404), but ${origin}/v1 has; set LLM_BASE_URL=${origin}/v1`);
    const wrongModel = await parlor(['doctor'], { ...env, LLM_BASE_URL: `${origin}/v1`, LLM_MODEL: 'llama3' });
    expect(wrongModel.stdout).toContain(`✗ model: ${origin}/v1 does not serve a model named "llama3" (it serves llama3.1, qwen2.5); check LLM_MODEL`);
    const fine = await parlor(['doctor'], { ...env, LLM_BASE_URL: `${origin}/v1`, LLM_MODEL: 'llama3.1' });
    expect(fine.stdout).toContain(`✓ model: openai llama3.1 at ${origin}/v1 is reachable and serves the model`);
    await new Promise((resolve) => ollama.close(resolve));
  });

  it('a model error in a turn is logged at warn with the endpoint, the status and the provider\'s message', async () => {
    fake.script({ status: 404, text: 'model "nope" not found, try pulling it first' });
    const result = await parlor(['chat'], { ...model(), LOG_LEVEL: 'warn', DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: path.join(root, 'personas') }, 'hello\n');
    expect(result.stdout).toBe('Sorry, the model rejected that request, so I could not answer.');
    const line = result.stderr.split('\n').map((l) => { try { return JSON.parse(l); } catch { return undefined; } }).find((l) => l?.msg?.startsWith('the model call failed'));
    expect(line).toMatchObject({ level: 40, url: fake.openaiBaseUrl, status: 404, error: expect.stringContaining('model "nope" not found') });
  });

  it('doctor warns, without failing, about every persona whose commands run without bubblewrap: as a user of their own (root), off, or unsandboxed', async () => {
    // A PATH with node and nothing else: no bubblewrap.
    const bin = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-path-'));
    await fs.symlink(process.execPath, path.join(bin, 'node'));
    const dir = await writePersonas({ careful: { connectors: { users: ['telegram:1'] } }, brave: { connectors: { users: ['telegram:2'] }, tools: { shell: 'unsandboxed' } } });
    const result = await parlor(['doctor'], { ...model(), PATH: bin, DATABASE_URL: db.url, PARLOR_PERSONAS_DIR: dir });
    expect(result.exitCode).toBe(0);
    if (process.getuid?.() === 0) {
      // As root, commands run as a user of their own instead: the personas folder (mode 700 here) is out of its reach.
      expect(result.stdout).toContain('! shell sandbox: bubblewrap is not installed (apt install bubblewrap); commands run as the parlor-shell user; ');
      expect(result.stdout).toMatch(/shell_exec for persona careful runs as the parlor-shell user, who cannot enter /);
      expect(result.stdout).toMatch(/shell_exec for persona brave runs as the parlor-shell user, who cannot enter /);
    } else {
      expect(result.stdout).toContain('! shell sandbox: bubblewrap is not installed (apt install bubblewrap); ');
      expect(result.stdout).toContain('shell_exec is off for persona careful: bubblewrap is not installed (apt install bubblewrap), or set "shell": "unsandboxed" in its tools.jsonc');
      expect(result.stdout).toContain('shell_exec runs unsandboxed for persona brave ("shell": "unsandboxed" in its tools.jsonc)');
    }
    await fs.rm(bin, { recursive: true, force: true });
  });
});
