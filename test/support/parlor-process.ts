// A real `parlor start` as a child process, on a test database, the fake model and the scripted Bot API: for tests
// that kill it with SIGKILL and start it again.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');

export interface ParlorProcessOptions {
  databaseUrl: string;
  personasDir: string;
  llmBaseUrl: string;
  telegramApiRoot: string;
  role?: 'all' | 'worker';
  /** PATH of the process (the test's own by default): a folder without bubblewrap runs commands outside the sandbox. */
  path?: string;
}

/** Starts `parlor start` (with only what these options set in its environment) and adds it to `children`. */
export function startParlorProcess(options: ParlorProcessOptions, children: ResultPromise[]): ResultPromise {
  const child = execa('node', [bin, 'start', ...(options.role ? ['--role', options.role] : [])], {
    cwd: root,
    extendEnv: false,
    reject: false,
    env: {
      PATH: options.path ?? process.env.PATH!,
      HOME: process.env.HOME ?? '/tmp',
      DATABASE_URL: options.databaseUrl,
      PARLOR_PERSONAS_DIR: options.personasDir,
      PARLOR_HTTP_PORT: '0',
      LLM_BASE_URL: options.llmBaseUrl,
      LLM_MODEL: 'fake-model',
      TELEGRAM_BOT_TOKEN: '123456:TEST-token',
      TELEGRAM_API_ROOT: options.telegramApiRoot,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    },
  });
  children.push(child);
  return child;
}

/** Kills whatever is still running of `children` and waits for them. */
export async function killAll(children: ResultPromise[]): Promise<void> {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await Promise.allSettled(children);
}
