// The app every driver runs: the real composition root with one connector, a test database, the fake model, and
// one persona set up the same way on every platform.
import fs from 'node:fs/promises';
import pino from 'pino';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import type { Connector } from '../../src/connector.ts';
import type { Tool } from '../../src/tools/types.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import type { ConformanceTools } from './driver.ts';

export const PERSONA = 'parlor';

/** Where the persona lives on one platform: its people's addresses, its primary chat, and the group it answers in. */
export interface PersonaPlaces {
  connector: string;
  users: string[];
  approvers: string[];
  primaryChat: string;
  /** The group where it answers when mentioned. */
  team?: string;
}

function personaFiles(places: PersonaPlaces) {
  return {
    soul: 'You are Parlor, the persona of the conformance suite.',
    connectors: {
      users: places.users,
      approvers: places.approvers,
      primary: { connector: places.connector, to: places.primaryChat },
      channels: places.team ? [{ connector: places.connector, chat: places.team, mention: true }] : [],
    },
    tools: { approve: ['record_step'], approvalTimeoutSeconds: 30 },
  };
}

/** `record_step` needs approval and notes each run; `slow_step` waits until its time is up or the turn stops. */
function conformanceTools(): { tools: Tool[]; state: ConformanceTools } {
  const runs: string[] = [];
  let slowStarted: (() => void) | undefined;
  let slowStart: Promise<void> | undefined;
  const state: ConformanceTools = {
    runs,
    nextSlowStart: () => (slowStart ??= new Promise<void>((resolve) => (slowStarted = resolve))),
  };
  const recordStep: Tool<{ note: string }> = {
    name: 'record_step',
    description: 'Records a step (needs approval).',
    parameters: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'] },
    approval: { summary: (args) => `record the step "${args.note}"` },
    async run(args) {
      runs.push(args.note);
      return `recorded ${args.note}`;
    },
  };
  const slowStep: Tool<{ ms: number }> = {
    name: 'slow_step',
    description: 'Waits.',
    parameters: { type: 'object', properties: { ms: { type: 'number' } }, required: ['ms'] },
    timeoutMs: 60_000,
    async run(args, ctx) {
      slowStarted?.();
      slowStart = undefined;
      slowStarted = undefined;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, args.ms);
        ctx.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
      return `waited ${args.ms} ms`;
    },
  };
  return { tools: [...createBuiltinTools({ timezone: 'UTC' }), recordStep, slowStep], state };
}

export interface ConformanceApp {
  app: App;
  model: FakeLlm;
  tools: ConformanceTools;
  stop(): Promise<void>;
}

export async function startConformanceApp(options: {
  places: PersonaPlaces;
  connectors: (app: () => App) => Connector[];
  /** Serve Parlor's HTTP server on a free port (`app.http.port`): for connectors that receive by webhook. */
  http?: boolean;
}): Promise<ConformanceApp> {
  const model = await startFakeLlm();
  let db: TestDatabase | undefined;
  let personasDir: string | undefined;
  let app: App | undefined;
  const stop = async () => {
    await app?.stop();
    await model.close();
    await db?.drop();
    if (personasDir) await fs.rm(personasDir, { recursive: true, force: true });
  };
  try {
    db = await createTestDatabase();
    personasDir = await writePersonas({ [PERSONA]: personaFiles(options.places) });
    const settings = parseSettings({
      DATABASE_URL: db.url,
      LLM_BASE_URL: model.openaiBaseUrl,
      LLM_MODEL: 'fake-model',
      PARLOR_PERSONAS_DIR: personasDir,
      ...(options.http ? { PARLOR_HTTP_PORT: '0' } : {}),
    });
    const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    const { tools, state } = conformanceTools();
    app = await startApp({
      settings,
      log,
      tools,
      questionSweepMs: 200,
      modelRetryDeadlineMs: 1500,
      http: options.http,
      connectors: () =>
        options.connectors(() => {
          if (!app) throw new Error('the app is not started yet');
          return app;
        }),
    });
    return { app, model, tools: state, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The persona's `"stream"` setting, as its tools.jsonc would set it: the turn runner reads it at each turn. */
export function setStreaming(app: App, on: boolean) {
  const persona = app.personas.find((p) => p.name === PERSONA);
  if (!persona) throw new Error(`no persona ${PERSONA}`);
  persona.tools.stream = on;
}

/** Closes what a scenario left open (its questions) and waits until its conversations have nothing to do. */
export async function settle(app: App, conversations: Iterable<string>) {
  for (const id of conversations) await app.questions.expireOpen(id, 'the scenario ended');
  for (const id of conversations) await app.waitForIdle(id, 15_000);
}
