// The core never imports a platform SDK or the adapter folders (DESIGN §1); `npm run lint` enforces it.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const eslint = new ESLint({ cwd: root });

async function importErrors(code: string, file = 'src/agent/example.ts'): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('the core import rule', () => {
  it.each([
    "import { Bot } from 'grammy';",
    "import { autoRetry } from '@grammyjs/auto-retry';",
    "import { Client } from 'discord.js';",
    "import { App } from '@slack/bolt';",
    "import { WebClient } from '@slack/web-api';",
    "import { createTerminalConnector } from '../../connectors/terminal/index.ts';",
    "import { createClockTool } from '../../tools/clock.ts';",
    "import { createBuiltinTools } from '#tools/index.ts';",
    "import { createTerminalConnector } from '#connectors/terminal/index.ts';",
  ])('rejects %s under src/', async (code) => {
    expect(await importErrors(`${code}\nexport {};`)).toHaveLength(1);
  });

  it('allows core modules, libraries and siblings', async () => {
    const code = "import { ToolRunner } from '#src/tools/runner.ts';\nimport pino from 'pino';\nimport { runAgentLoop } from './loop.ts';\nexport { ToolRunner, pino, runAgentLoop };";
    expect(await importErrors(code)).toEqual([]);
  });

  it('lets the composition root wire in connectors and tools', async () => {
    const code = "import { createBuiltinTools } from '#tools/index.ts';\nimport { createTerminalConnector } from '#connectors/terminal/index.ts';\nexport { createBuiltinTools, createTerminalConnector };";
    expect(await importErrors(code, 'src/app.ts')).toEqual([]);
  });

  it('lets connectors/ use a platform SDK', async () => {
    expect(await importErrors("import { Bot } from 'grammy';\nexport { Bot };", 'connectors/telegram/bot.ts')).toEqual([]);
  });
});

async function nameErrors(code: string, file = 'src/ingress/example.ts'): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result.messages.filter((m) => m.ruleId === 'no-restricted-syntax').map((m) => m.message);
}

describe('the core names no platform', () => {
  it.each([
    "export const isLocal = (c: string) => c === 'terminal';",
    "export const id = 'telegram';",
    "export const who = 'slack:U024BE7LH';",
    'export const root = `discord:${1}`;',
    "export const loud = 'Telegram';",
  ])('rejects %s under src/', async (code) => {
    expect(await nameErrors(code)).toHaveLength(1);
  });

  it('allows the words in prose and comments, and the composition root to name them', async () => {
    expect(await nameErrors("// the terminal's chat\nexport const text = 'answered in the terminal';")).toEqual([]);
    expect(await nameErrors("export const id = 'telegram';", 'src/app.ts')).toEqual([]);
    expect(await nameErrors("export const id = 'telegram';", 'connectors/telegram/entry.ts')).toEqual([]);
  });

  it('holds for the core as it is', async () => {
    const results = await eslint.lintFiles(['src/**/*.ts']);
    expect(results.flatMap((r) => r.messages.filter((m) => m.ruleId === 'no-restricted-syntax').map((m) => `${r.filePath}: ${m.message}`))).toEqual([]);
  });
});

describe('a timeout signal is never put inside AbortSignal.any', () => {
  it.each(['src/tools/web/example.ts', 'connectors/shared/example.ts', 'tools/example.ts', 'test/example.ts'])('in %s', async (file) => {
    const code = 'export const signal = (stop: AbortSignal) => AbortSignal.any([stop, AbortSignal.timeout(5_000)]);';
    expect(await nameErrors(code, file)).toEqual([expect.stringContaining('use deadline() from src/abort.ts')]);
    expect(await nameErrors('export const signal = AbortSignal.timeout(5_000);', file)).toEqual([]);
  });
});
