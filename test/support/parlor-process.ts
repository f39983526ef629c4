// A real `parlor start` as a child process, on a test database, the fake model and the scripted Bot API: for tests
// that kill it with SIGKILL and start it again, and for several processes of a deployment on one database.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(root, 'bin/parlor.js');
/** The bot token the process is given (its webhook secret is `webhookSecret` of it). */
export const TELEGRAM_TOKEN = '123456:TEST-token';

export interface ParlorProcessOptions {
  databaseUrl: string;
  personasDir: string;
  llmBaseUrl: string;
  telegramApiRoot: string;
  role?: 'all' | 'worker' | 'ingress';
  /** PATH of the process (the test's own by default): a folder without bubblewrap runs commands outside the sandbox. */
  path?: string;
  /** PARLOR_HTTP_PORT: a port of its own, where a test posts webhooks (any free one by default). */
  httpPort?: number;
  /** PARLOR_HOME (by default Parlor's own default, `.parlor` in the checkout). */
  home?: string;
  /** More of its environment (TELEGRAM_WEBHOOK_URL, SLACK_* …), over what the options above set. */
  env?: Record<string, string>;
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
      PARLOR_HTTP_PORT: String(options.httpPort ?? 0),
      ...(options.home ? { PARLOR_HOME: options.home } : {}),
      LLM_BASE_URL: options.llmBaseUrl,
      LLM_MODEL: 'fake-model',
      TELEGRAM_BOT_TOKEN: TELEGRAM_TOKEN,
      TELEGRAM_API_ROOT: options.telegramApiRoot,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      ...options.env,
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
