import path from 'node:path';
// The composition root: the one place that knows the connectors, the built-in tools and the core together.
import type { Logger } from 'pino';
import { createBuiltinTools } from '#tools/index.ts';
import type { Connector } from '#src/connector.ts';
import { CONNECTOR_IDS, CONNECTORS, LOCAL_CONNECTORS } from '#connectors/registry.ts';
import { requireModel, settingSecrets, type Settings } from '#src/config/env.ts';
import { checkPersonaConnectors, loadPersonas, type Persona } from '#src/config/persona.ts';
import { connectDatabase, migrateDatabase, type Database } from '#src/db/client.ts';
import { conversationIsIdle } from '#src/db/conversations.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '#src/db/embedded-postgres.ts';
import { createDelivery, type Delivery } from '#src/agent/delivery.ts';
import { createTurnRunner, type TurnRunner } from '#src/agent/turn-runner.ts';
import { DEFAULT_HISTORY_BUDGET, type HistoryBudget } from '#src/agent/history.ts';
import { createConversationSummaries } from '#src/jobs/conversation-summaries.ts';
import { startJobSystem, type JobSystem } from '#src/jobs/boss.ts';
import { startMaintenance } from '#src/jobs/maintenance.ts';
import { exitFenced, startProcessBeat } from '#src/jobs/process-beat.ts';
import { createScheduler, type Scheduler } from '#src/jobs/scheduler.ts';
import { DEFAULT_TURN_CONCURRENCY, startTurnWorkers, type TurnWorkers } from '#src/jobs/workers.ts';
import { createCommandHandler, type CommandHandler } from '#src/ingress/control.ts';
import { createSubagents } from '#src/subagents/service.ts';
import { createPersonaMail } from '#src/subagents/persona-mail.ts';
import { awaitAttachmentDownloads } from '#src/ingress/downloads.ts';
import { createHeldEvents, HELD_REPLAY } from '#src/ingress/held-events.ts';
import { createIngress } from '#src/ingress/pipeline.ts';
import { createModelClient, modelEndpoint, withModelRetries } from '#src/llm/index.ts';
import type { ModelClient } from '#src/llm/types.ts';
import type { HttpServer } from '#src/http/server.ts';
import { createQuestions, type Questions } from '#src/questions/service.ts';
import { ConfigError } from '#src/config/errors.ts';
import { createExclusiveLocks } from '#src/db/exclusive-locks.ts';
import { configuredFor, createInboundHistory } from '#src/db/inbound-history.ts';
import { ToolCatalog } from '#src/tools/catalog.ts';
import { createCustomToolProvider } from '#src/tools/custom/provider.ts';
import { createMcpToolProvider } from '#src/mcp/index.ts';
import { checkToolPolicies, unapprovedActions } from '#src/tools/policy.ts';
import { shellAccess, shellSandboxStatus } from '#src/tools/sandbox.ts';
import { startMemoryService } from '#src/memory/service.ts';
import { MemoryRegistry } from '#src/memory/store.ts';
import { ProcessRegistry, type ProcessRequest } from '#src/tools/processes.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import { searchProviderFromSettings } from '#src/tools/web/search.ts';
import { createProcessStore } from '#src/subagents/background-processes.ts';
import { createCustomToolCommands } from '#tools/shell-exec.ts';
import { killTagged } from '#tools/shell-process.ts';
import type { Tool, ToolProvider } from '#src/tools/types.ts';
import { CHANNELS, listen } from '#src/db/channels.ts';
import type { TurnJobData } from '#src/turns.ts';

export interface AppOptions {
  settings: Settings;
  log: Logger;
  /** Connectors this process runs (the terminal for `parlor chat`; platforms for `parlor start`). */
  connectors?: (ctx: { settings: Settings; personas: Persona[] }) => Connector[] | Promise<Connector[]>;
  /** Connectors that run in other processes of this deployment, besides those the settings configure. */
  remoteConnectors?: string[];
  /** Run turn jobs here. */
  worker?: boolean;
  workerConcurrency?: number;
  http?: boolean;
  /** Overrides for tests and benchmarks. */
  model?: ModelClient;
  tools?: Tool[];
  /** Where tools beyond the built-ins come from (custom tool folders, MCP servers); both by default. */
  toolProviders?: ToolProvider[];
  /** The registry the given `tools` keep their background commands in (createBuiltinTools' `processes`). */
  processes?: ProcessRegistry;
  /** The registry the given `tools` keep memories through (createBuiltinTools' `memory`). */
  memory?: MemoryRegistry;
  history?: HistoryBudget;
  modelRetryDeadlineMs?: number;
  /** How often the receivers' locks are checked (tests). */
  exclusiveCheckMs?: number;
  /** How often what a gone process left (messages it was sending, turn jobs it held) is looked for (tests). */
  goneSweepMs?: number;
  /** How long a turn runs before "typing…" is shown (tests). */
  typingAfterMs?: number;
  /** How often events kept on disk are looked for while running, and how old they must be to be tried (tests). */
  heldEventsReplay?: { everyMs: number; olderThanMs: number };
  questionSweepMs?: number;
  /** How often a waiting ask_persona looks for its reply besides the notification (tests). */
  personaAskRecheckMs?: number;
  /** How long a process may go without its heartbeat before the others fence it (PARLOR_HUNG_AFTER_SECONDS; tests). */
  hungAfterMs?: number;
  /** This process was fenced (others took it for hung and took its work): by default it logs why and exits at once. */
  onFenced?: () => void;
}

export interface App {
  database: Database;
  jobs: JobSystem;
  delivery: Delivery;
  personas: Persona[];
  runner: TurnRunner;
  connectors: Map<string, Connector>;
  http?: HttpServer;
  ingress: ReturnType<typeof createIngress>;
  maintenance?: ReturnType<typeof startMaintenance>;
  questions: Questions;
  scheduler: Scheduler;
  /**
   * Ends what a conversation is doing, for good (the terminal closing): its open questions are closed with `reason`,
   * its running turn stopped and its waiting messages set aside, so nothing answers into a later session.
   */
  stopConversation(conversationId: string, reason: string): Promise<void>;
  /** Resolves when the conversation has no turn running or waiting (or, with `orQuestion`, waits on a person). */
  waitForIdle(conversationId: string, timeoutMs?: number, options?: { orQuestion?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

/** The platform connectors whose settings are present; each platform's SDK loads only when used. */
export async function createPlatformConnectors(settings: Settings, log: Logger): Promise<Connector[]> {
  const connectors: Connector[] = [];
  for (const entry of CONNECTORS) {
    const connectorSettings = settings.connectors[entry.id];
    if (connectorSettings !== undefined) connectors.push(await entry.create(connectorSettings, { log }));
  }
  return connectors;
}

/** Connector ids that may be running somewhere in this deployment. */
export function configuredConnectorIds(settings: Settings): string[] {
  return [...LOCAL_CONNECTORS, ...Object.keys(settings.connectors)];
}

export async function startApp(options: AppOptions): Promise<App> {
  const { settings, log } = options;
  // Configuration errors surface before anything starts.
  const llm = options.model ? undefined : requireModel(settings);
  const personas = loadPersonas(settings.personasDir);
  // The shell sandbox hides Parlor's own state wherever it lives: its home (the embedded database and its password),
  // the personas folder (other personas, .env files) and the environment file.
  const hide = [settings.home, settings.personasDir, path.join(process.cwd(), '.env')];
  // Commands shell_exec leaves running in the background; recorded in Postgres once the database is there.
  const processes = options.processes ?? new ProcessRegistry(log.child({ module: 'processes' }));
  // Memories and user models, on Postgres once the database is there.
  const memory = options.memory ?? new MemoryRegistry();
  const toolList =
    options.tools ??
    createBuiltinTools({
      timezone: settings.timezone,
      shellSandbox: { hide },
      personaDirs: personas.map((p) => p.dir),
      // Files send_message sends are copied here when the tool runs (hidden from commands, kept a day).
      outgoingDir: path.join(settings.home, 'outgoing'),
      processes,
      webSearch: searchProviderFromSettings(settings),
      memory,
    });
  const providers = options.toolProviders ?? [
    // Custom tool folders run as shell_exec's commands do, hidden from the same places.
    createCustomToolProvider({
      sharedDir: settings.toolsDir,
      reservedNames: toolList.map((t) => t.name),
      commands: createCustomToolCommands({ hide: [...hide, ...personas.map((p) => p.dir)] }),
      log: log.child({ module: 'custom-tools' }),
    }),
    // MCP servers of mcp.jsonc (PARLOR_HOME's for every persona, and each persona's own), started when first needed.
    createMcpToolProvider({ globalFile: path.join(settings.home, 'mcp.jsonc'), env: process.env, log: log.child({ module: 'mcp' }) }),
  ];
  const catalog = new ToolCatalog(toolList, providers, log.child({ module: 'tools' }));
  // Each persona's lists name its own tools: the built-ins and its custom tools (MCP servers may not be up yet).
  const toolNames = new Map<string, string[]>();
  for (const persona of personas) toolNames.set(persona.name, (await catalog.all(persona, { skip: ['mcp'] })).map((t) => t.name));
  checkToolPolicies(personas, (persona) => toolNames.get(persona.name) ?? []);
  for (const warning of unapprovedActions(personas, toolList)) log.warn(warning);
  // The names the personas use must be connectors Parlor has (or that run elsewhere in this deployment).
  const given = (await options.connectors?.({ settings, personas })) ?? [];
  const namable = [...CONNECTOR_IDS, ...(options.remoteConnectors ?? []), ...given.map((c) => c.id)];
  for (const persona of personas) checkPersonaConnectors(persona, namable);
  if (toolList.some((t) => t.name === 'shell_exec')) {
    const sandbox = shellSandboxStatus();
    if (sandbox.available || sandbox.separateUser) log.info(`shell sandbox: ${sandbox.detail}`);
    for (const persona of personas) {
      const { warning } = shellAccess(persona, sandbox);
      if (warning) log.warn({ persona: persona.name }, warning);
    }
  }

  let embedded: EmbeddedPostgres | undefined;
  let url = settings.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres(settings.home, (msg) => log.info(msg));
    url = embedded.localUrl;
  }
  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err) => log.warn({ err }, 'shutdown step failed'));
    await embedded?.release().catch((err) => log.warn({ err }, 'embedded Postgres did not stop cleanly'));
  };
  try {
    const database = await connectDatabase(url);
    cleanups.push(() => database.close());
    await migrateDatabase(database);
    // Beating before anything takes work: a process that stops with its connections open is fenced by the others.
    const beat = await startProcessBeat({
      database,
      log,
      hungAfterMs: options.hungAfterMs ?? (settings.hungAfterSeconds === undefined ? undefined : settings.hungAfterSeconds * 1000),
      onFenced: options.onFenced ?? (() => exitFenced(log)),
    });
    cleanups.push(() => beat.stop());
    const jobs = await startJobSystem(database, log);
    cleanups.push(() => jobs.stop({ timeoutMs: 3000 }));
    const processStore = createProcessStore({ database, jobs, log, killTagged });
    processes.attach(processStore);
    // Memories, knowledge and their embedding jobs (stopped before the job system, as cleanups run in reverse).
    const memoryService = await startMemoryService({ database, jobs, personas: () => personas, embeddings: settings.embeddings, log, worker: options.worker !== false });
    cleanups.push(() => memoryService.stop());
    const memoryStore = memoryService.store;
    memory.attach(memoryStore, memoryService.knowledge);
    // After the turns have stopped (cleanups run in reverse) and while jobs can still carry the wakes that say so.
    cleanups.push(async () => {
      processStore.stop();
      await processes.stopAll();
    });

    const connectors = new Map<string, Connector>();
    for (const c of given) connectors.set(c.id, c);
    // One receiver per bot token across the deployment where the platform allows only one (long polling, a gateway,
    // a socket): a second process is refused before it splits or doubles the events.
    const exclusive = createExclusiveLocks(database);
    cleanups.push(() => exclusive.release());
    for (const connector of connectors.values()) {
      if (connector.exclusive) {
        const lock = await exclusive.take(connector.exclusive.key);
        if (!lock.taken) {
          throw new ConfigError(
            `another Parlor process on this database already runs ${connector.exclusive.describe}${lock.holder ? ` (${lock.holder})` : ''}; ` +
              'the platform gives its events to one receiver per token: stop that process, or start this one with --role worker',
          );
        }
      }
    }
    // A Postgres restart drops the locks with their connection: taken again; if another process took one meanwhile,
    // this process stops that receiver rather than share the token's events with it.
    const unwatch = exclusive.watch(options.exclusiveCheckMs ?? 5000, (key, holder) => {
      const connector = [...connectors.values()].find((c) => c.exclusive?.key === key);
      if (!connector) return;
      log.error(
        { connector: connector.id, holder },
        `another Parlor process took over ${connector.exclusive!.describe} while this one was away from the database; this one stops receiving for it`,
      );
      connectors.delete(connector.id);
      void connector.stop().catch((err: unknown) => log.warn({ err, connector: connector.id }, 'the connector did not stop cleanly'));
    });
    cleanups.push(async () => unwatch());
    const knownConnectors = () => [...new Set([...configuredConnectorIds(settings), ...(options.remoteConnectors ?? []), ...connectors.keys()])];
    const delivery = createDelivery({ db: database.db, sql: database.sql, session: database.applicationName, connectors, knownConnectors, log, beforeAct: beat.beforeAct });
    cleanups.push(() => delivery.stop());
    // Stopped after the turns (cleanups run in reverse): MCP server processes and connections.
    cleanups.push(() => catalog.close());

    const model =
      options.model ??
      withModelRetries(await createModelClient(llm!), {
        deadlineMs: options.modelRetryDeadlineMs ?? llm!.retryDeadlineMs,
        onRetry: (err, attempt, delayMs) =>
          log.warn(
            { url: modelEndpoint(llm!), status: (err as { status?: number }).status, err: (err as Error).message, attempt, delayMs },
            `model call failed; retrying in ${(delayMs / 1000).toFixed(1)} s`,
          ),
      });
    const questions = createQuestions({ database, delivery, jobs, personas: () => personas, connectors, log, sweepMs: options.questionSweepMs });
    await questions.start();
    cleanups.push(() => questions.stop());
    const scheduler = createScheduler({ database, jobs, personas: () => personas, timezone: settings.timezone, log, knownConnectors });
    const tools = new ToolRunner(toolList, questions.approvalGate, settingSecrets(settings, CONNECTORS));
    // Tasks are stopped the way /stop stops a turn; the command handler is made below, with the runner.
    const late: { commands?: CommandHandler } = {};
    const subagents = createSubagents({
      database,
      jobs,
      personas: () => personas,
      stopConversation: async (conversationId) => late.commands?.stop(conversationId),
      log,
      worker: options.worker !== false,
    });
    const personaMail = createPersonaMail({ database, jobs, personas: () => personas, log, recheckMs: options.personaAskRecheckMs });
    cleanups.push(() => personaMail.stop());
    const summaries = createConversationSummaries({
      database,
      jobs,
      model,
      defaultModel: llm?.model ?? 'default',
      personas: () => personas,
      budget: options.history ?? DEFAULT_HISTORY_BUDGET,
      log,
      worker: options.worker !== false,
    });
    await summaries.start();
    cleanups.push(() => summaries.stop());
    const runner = createTurnRunner({
      database,
      beforeAct: beat.beforeAct,
      personas: () => personas,
      model,
      defaultModel: llm?.model ?? 'default',
      tools,
      catalog,
      delivery,
      connectors,
      knownConnectors,
      timezone: settings.timezone,
      log,
      history: options.history,
      questions,
      scheduler,
      modelUrl: llm && modelEndpoint(llm),
      awaitDownloads: (conversationId, turnId, signal) => awaitAttachmentDownloads(database.db, conversationId, turnId, undefined, signal),
      subagents,
      personaMail,
      userModel: (persona, user) => memoryStore.userModel(persona, user),
      summaries: summaries.request,
      typingAfterMs: options.typingAfterMs,
    });
    const commands = createCommandHandler({
      db: database.db,
      sql: database.sql,
      defaultModel: llm?.model ?? 'default',
      cancelLocal: (turnId) => runner.cancel(turnId),
      // Its tasks and its background commands.
      cancelTasks: async (conversationId) => (await subagents.cancelConversation(conversationId)) + (await processes.stopConversation(conversationId)),
    });
    late.commands = commands;
    let workers: TurnWorkers | undefined;
    const queued = (conversationId: string, jobId: string, data: TurnJobData) => workers?.announce(conversationId, jobId, data);
    const storing = (jobId: string) => workers?.expect(jobId);
    const hold = (conversationId: string, jobId: string, data: TurnJobData) => workers?.hold(conversationId, jobId, data);
    const ingress = createIngress({ database, personas: () => personas, delivery, commands, connectors, log, questions, queued, storing, hold });
    cleanups.push(() => ingress.stop());

    let maintenance: ReturnType<typeof startMaintenance> | undefined;
    if (options.worker !== false) {
      maintenance = startMaintenance({ database, jobs, delivery, personas: () => personas, log, goneSweepMs: options.goneSweepMs, beat });
      cleanups.push(() => maintenance!.stop());
      const cancelListener = await listen(database.sql, CHANNELS.cancel, (turnId) => runner.cancel(turnId));
      cleanups.push(() => cancelListener.unlisten());
      workers = await startTurnWorkers(jobs, database.sql, runner, { concurrency: options.workerConcurrency ?? settings.turnConcurrency ?? DEFAULT_TURN_CONCURRENCY, log });
      await scheduler.start();
      cleanups.push(() => scheduler.stop());
      await subagents.start();
      cleanups.push(() => subagents.stop());
      processStore.start();
      const processListener = await listen(database.sql, CHANNELS.process, (payload) => {
        try {
          processes.handle(JSON.parse(payload) as ProcessRequest);
        } catch (err) {
          log.warn({ err }, 'a background command request could not be read');
        }
      });
      cleanups.push(() => processListener.unlisten());
    }
    await delivery.startOutbox();

    let http: HttpServer | undefined;
    if (options.http) {
      const { createHttpApp, listen } = await import('#src/http/server.ts');
      const { mountRemoteMethodApi } = await import('#src/http/remote-methods.ts');
      const app = createHttpApp(async () => {
        await database.sql`select 1`;
        // A connector that is starting or cannot reach its platform makes the process unhealthy (503).
        const states = Object.fromEntries([...connectors].map(([id, c]) => [id, c.status?.() ?? { state: 'up' as const }]));
        return { healthy: Object.values(states).every((s) => s.state === 'up'), personas: personas.map((p) => p.name), connectors: states };
      });
      mountRemoteMethodApi(app, { token: settings.http.apiToken, questions, log });
      for (const connector of connectors.values()) {
        if (connector.webhook) app.post(connector.webhook.path, (c) => connector.webhook!.handle(c.req.raw));
      }
      http = await listen(app, { host: settings.http.host, port: settings.http.port, log });
      cleanups.push(() => http!.close());
    }

    const held = createHeldEvents({ directory: path.join(settings.home, 'held-events'), log: log.child({ module: 'held-events' }) });
    // What a connector acknowledged before a process here, now gone, could store it: stored once the connectors run
    // (a file it brings is fetched through its connector), and before what they bring meanwhile, which waits for it: a
    // chat's events go in the order they came (a newer one stored first would be answered first). Then, while
    // running, what its keeper gave up on (the database away for longer than its tries).
    const replayHeld = (olderThanMs?: number) =>
      held.replay((event) => ingress.handle(event), { olderThanMs }).catch((err: unknown) => log.error({ err }, 'events kept on disk could not be read'));
    let replayedAtStart!: () => void;
    const afterReplay = new Promise<void>((resolve) => (replayedAtStart = resolve));
    for (const connector of connectors.values()) {
      await connector.start(async (event) => {
        await afterReplay;
        return ingress.handle(event);
      }, held, createInboundHistory(database.db, connector.id, () => configuredFor(personas, connector.id)));
      cleanups.push(() => connector.stop());
      log.info({ connector: connector.id }, 'connector started');
    }
    await replayHeld();
    replayedAtStart();
    const heldReplay = options.heldEventsReplay ?? HELD_REPLAY;
    let replaying: Promise<unknown> | undefined;
    const heldTimer = setInterval(() => {
      replaying ??= replayHeld(heldReplay.olderThanMs).finally(() => (replaying = undefined));
    }, heldReplay.everyMs);
    heldTimer.unref();
    cleanups.push(async () => {
      clearInterval(heldTimer);
      await replaying;
    });
    // Stopping runs in reverse: turns finish (or are released) first, while connectors can still send.
    if (workers) {
      cleanups.push(async () => {
        // A turn waiting on a person could wait for minutes: release it now; it carries on at the next start.
        runner.interrupt(questions.waitingTurns());
        await workers.stop();
      });
    }

    let stopping: Promise<void> | undefined;
    return {
      database,
      jobs,
      delivery,
      personas,
      runner,
      connectors,
      http,
      ingress,
      maintenance,
      questions,
      scheduler,
      async waitForIdle(conversationId, timeoutMs = 600_000, waitOptions = {}) {
        const deadline = Date.now() + timeoutMs;
        const settled = async () =>
          (await conversationIsIdle(database.db, conversationId)) || (waitOptions.orQuestion === true && (await questions.awaitingAnswer(conversationId)));
        while (!(await settled())) {
          if (Date.now() > deadline) throw new Error(`conversation ${conversationId} still busy after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 20));
        }
      },
      async stopConversation(conversationId, reason) {
        await questions.expireOpen(conversationId, reason);
        await commands.stop(conversationId);
      },
      stop: () => (stopping ??= cleanup()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
