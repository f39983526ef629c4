// `npm start` on a fresh machine: no DATABASE_URL, so an embedded Postgres under PARLOR_HOME.
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/net.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');

let fake: FakeLlm;
let home: string;
let env: Record<string, string>;
const children: ResultPromise[] = [];


function run(args: string[], input?: string) {
  const child = execa('node', [bin, ...args], { cwd: root, env, extendEnv: false, input, reject: false, timeout: 90_000 });
  children.push(child);
  return child;
}

async function waitForHealth(port: number, child: ResultPromise): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`parlor start exited early: ${(await child).stderr}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (res.ok) return (await res.json()) as Record<string, unknown>;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('parlor start never became healthy');
}

async function stopWithCtrlC(child: ResultPromise): Promise<{ exitCode?: number; ms: number }> {
  const t0 = Date.now();
  child.kill('SIGINT');
  const result = await child;
  return { exitCode: result.exitCode, ms: Date.now() - t0 };
}

async function postgresRunning(): Promise<boolean> {
  const settings = JSON.parse(await fs.readFile(path.join(home, 'postgres.json'), 'utf8')) as { port: number };
  return new Promise((resolve) => {
    const socket = net.connect(settings.port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

beforeAll(async () => {
  fake = await startFakeLlm();
  home = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-home-'));
  env = {
    PATH: process.env.PATH!,
    HOME: process.env.HOME ?? home,
    PARLOR_HOME: home,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    LOG_LEVEL: 'info',
  };
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await fake?.close();
  await fs.rm(home, { recursive: true, force: true });
});

describe('parlor start with no DATABASE_URL', () => {
  it('starts an embedded Postgres, serves /healthz, shares it with parlor chat, stops cleanly, and keeps the data', async () => {
    const port = await freePort();
    env.PARLOR_HTTP_PORT = String(port);
    const first = run(['start']);
    const health = await waitForHealth(port, first);
    expect(health).toMatchObject({ status: 'ok', personas: ['assistant'] });

    // A second process on the same home shares the running database.
    const chat = await run(['chat'], 'hello from the terminal\n');
    expect(chat.exitCode).toBe(0);
    expect(chat.stdout).toBe('echo: hello from the terminal');
    expect(await postgresRunning()).toBe(true);

    const stopped = await stopWithCtrlC(first);
    expect(stopped.exitCode).toBe(0);
    expect(stopped.ms).toBeLessThan(5000);
    expect(await postgresRunning()).toBe(false);
    expect((await first).stdout).toContain('embedded Postgres stopped');

    // A second start reuses the data: the earlier conversation is still there.
    const second = run(['start']);
    await waitForHealth(port, second);
    const status = await run(['chat'], '/status\n');
    expect(status.stdout).toMatch(/Messages since the last \/new: 2 · turns: 1/);
    expect((await stopWithCtrlC(second)).exitCode).toBe(0);
    expect(existsSync(path.join(home, 'postgres', 'postmaster.pid'))).toBe(false);
  }, 120_000);
});

describe('parlor start when Telegram is out of reach', () => {
  it('runs anyway, logs every failed try with its cause and the next time, reports telegram down in /healthz (503), and Ctrl-C stops it and its Postgres', async () => {
    const port = await freePort();
    const child = execa('node', [bin, 'start'], {
      cwd: root,
      env: { ...env, PARLOR_HTTP_PORT: String(port), TELEGRAM_BOT_TOKEN: '123456:unreachable', TELEGRAM_API_ROOT: 'http://127.0.0.1:9', LOG_LEVEL: 'info' },
      extendEnv: false,
      reject: false,
      timeout: 90_000,
    });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const deadline = Date.now() + 60_000;
    let health: { status: number; body: any } | undefined;
    while (Date.now() < deadline) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`);
        health = { status: res.status, body: await res.json() };
        // Both: start-up goes on past the connector's first failed try, and says it is running a moment later.
        if (out.includes('cannot reach Telegram') && out.includes('Parlor is running')) break;
      } catch {
        // not up yet
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(health?.status).toBe(503);
    expect(health?.body).toMatchObject({ status: 'degraded', connectors: { telegram: { state: 'down', detail: expect.stringMatching(/trying again in \d+ s/) } } });
    const line = out.split('\n').map((l) => { try { return JSON.parse(l); } catch { return undefined; } }).find((l) => l?.msg?.startsWith('cannot reach Telegram'));
    expect(line).toMatchObject({ level: 40, apiRoot: 'http://127.0.0.1:9', attempt: 1 });
    expect(line.msg).toMatch(/^cannot reach Telegram \(.+; trying again in 2 s\)$/);
    expect(out).toContain('Parlor is running');

    const stopped = await stopWithCtrlC(child);
    expect(stopped.exitCode).toBe(0);
    expect(stopped.ms).toBeLessThan(5000);
    expect(await postgresRunning()).toBe(false);
  }, 120_000);

  it('a token Telegram refuses stops start-up with one line that says which variable and where to get a new one', async () => {
    const { createServer } = await import('node:http');
    const telegram = createServer((_req, res) => res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error_code: 401, description: 'Unauthorized' })));
    await new Promise<void>((resolve) => telegram.listen(0, '127.0.0.1', resolve));
    const apiRoot = `http://127.0.0.1:${(telegram.address() as { port: number }).port}`;
    const result = await execa('node', [bin, 'start'], {
      cwd: root,
      env: { ...env, PARLOR_HTTP_PORT: String(await freePort()), TELEGRAM_BOT_TOKEN: '123456:refused', TELEGRAM_API_ROOT: apiRoot },
      extendEnv: false,
      reject: false,
      timeout: 60_000,
    });
    expect(result.exitCode).toBe(2);
    expect(result.stderr.trim()).toBe(
      `parlor: TELEGRAM_BOT_TOKEN was refused by ${apiRoot} (401 Unauthorized); get the token again from @BotFather (/mybots → your bot → API Token) and set TELEGRAM_BOT_TOKEN`,
    );
    expect(await postgresRunning()).toBe(false);
    await new Promise((resolve) => telegram.close(resolve));
  }, 90_000);
});
