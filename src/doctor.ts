import { requireModel, type Settings } from '#src/config/env.ts';
import type { ConnectorEntry } from '#src/connector.ts';
import { ConfigError } from '#src/config/errors.ts';
import { loadPersonas, type Persona } from '#src/config/persona.ts';
import { connectDatabase, describeError, redactUrl } from '#src/db/client.ts';
import { startEmbeddedPostgres } from '#src/db/embedded-postgres.ts';
import { extensionStates, type ExtensionState } from '#src/db/extensions.ts';
import { modelEndpoint } from '#src/llm/index.ts';
import { createEmbeddingClient, type EmbeddingError } from '#src/memory/embeddings.ts';
import { checkToolPolicies, unapprovedActions } from '#src/tools/policy.ts';
import { formatMcpStatus, mcpStatusHasProblems, type McpToolProvider } from '#src/mcp/index.ts';
import type { ToolCatalog } from '#src/tools/catalog.ts';
import { turnToolsReport } from '#src/tools/tool-report.ts';
import type { Tool } from '#src/tools/types.ts';
import { shellAccess, shellSandboxStatus } from '#src/tools/sandbox.ts';

interface Check {
  name: string;
  /** What is fine; a `warning` is worth fixing but does not fail the check. Throws when it fails. */
  run(): Promise<string | { warning: string }>;
  /** Not run, and not shown (what it looks at could not be reached: another check says why). */
  skip?(): boolean;
}

const TIMEOUT_MS = 8000;

/** `parlor doctor`: checks each part a running Parlor needs and says how to fix what is wrong. Exit 1 if any fails. */
export async function runDoctor(
  settings: Settings,
  out: NodeJS.WritableStream,
  options: {
    tools?: readonly Pick<Tool, 'name' | 'approval'>[];
    /** The connector registry: the configured ones are checked against their platforms. */
    connectors?: readonly ConnectorEntry<any>[];
    /** Every connector id persona files may name. */
    connectorIds?: readonly string[];
    /** With `persona`: the tools that persona's turns see, per kind of turn, are listed after the checks. */
    catalog?: ToolCatalog;
    /** The custom tool folders: what each persona's could not load. */
    customTools?: { problems(persona: Persona): Promise<string[]> };
    /** The MCP servers of mcp.jsonc: each is started and asked for its tools. */
    mcp?: Pick<McpToolProvider, 'check'>;
    persona?: string;
  } = {},
): Promise<number> {
  let extensions: Record<'pg_trgm' | 'vector', ExtensionState> | undefined;
  let memoryMigrated = false;
  // The personas, read once for every check that looks at them: with the connector ids checked (as start-up does),
  // and without (the approvals and the sandbox are worth showing even when a connector name is wrong). Undefined
  // when they cannot be read: the personas check says why.
  const loaded = new Map<'checked' | 'lenient', Persona[] | undefined>();
  const personas = (mode: 'checked' | 'lenient'): Persona[] | undefined => {
    if (!loaded.has(mode)) {
      try {
        loaded.set(mode, loadPersonas(settings.personasDir, mode === 'checked' ? { connectors: options.connectorIds } : {}));
      } catch {
        loaded.set(mode, undefined);
      }
    }
    return loaded.get(mode);
  };
  const checks: Check[] = [
    {
      name: 'personas',
      run: async () => {
        const found = loadPersonas(settings.personasDir, { connectors: options.connectorIds });
        loaded.set('checked', found);
        if (options.catalog) {
          // Each persona's lists may name its custom tools too.
          const names = new Map<string, string[]>();
          for (const persona of found) names.set(persona.name, (await options.catalog.all(persona, { skip: ['mcp'] })).map((t) => t.name));
          checkToolPolicies(found, (persona) => names.get(persona.name) ?? []);
        } else if (options.tools) checkToolPolicies(found, options.tools.map((t) => t.name));
        return `${found.length} in ${settings.personasDir}: ${found.map((p) => p.name).join(', ')}`;
      },
    },
    {
      name: 'database',
      run: async () => {
        const embedded = settings.databaseUrl ? undefined : await startEmbeddedPostgres(settings.home);
        const url = settings.databaseUrl ?? embedded!.localUrl;
        try {
          const db = await connectDatabase(url, { max: 1 });
          const [row] = await db.sql<{ version: string; migrated: boolean }[]>`
            select current_setting('server_version') as version, to_regclass('memories') is not null as migrated`;
          memoryMigrated = row.migrated;
          extensions = await extensionStates(db.db, ['pg_trgm', 'vector']).finally(() => db.close());
          return `${settings.databaseUrl ? redactUrl(url) : `embedded under ${settings.home}`} (Postgres ${row.version})`;
        } finally {
          await embedded?.release();
        }
      },
    },
    { name: 'pg_trgm', skip: () => !extensions, run: async () => checkExtension(extensions!.pg_trgm, memoryMigrated, EXTENSION_EFFECTS.pg_trgm) },
    { name: 'pgvector', skip: () => !extensions, run: async () => checkExtension(extensions!.vector, memoryMigrated, EXTENSION_EFFECTS.vector) },
    { name: 'custom tools', skip: () => !options.customTools, run: () => checkCustomTools(settings, options.customTools!, personas('checked') ?? []) },
    { name: 'MCP servers', skip: () => !options.mcp, run: () => checkMcp(options.mcp!, personas('checked') ?? []) },
    { name: 'model', run: () => checkModel(settings) },
    { name: 'embeddings', run: () => checkEmbeddings(settings) },
    { name: 'shell sandbox', run: async () => checkShellSandbox(personas('lenient') ?? []) },
    { name: 'approvals', run: async () => checkApprovals(personas('lenient') ?? [], options.tools ?? []) },
  ];
  for (const entry of options.connectors ?? []) {
    const connectorSettings = settings.connectors[entry.id];
    if (connectorSettings !== undefined) checks.push({ name: entry.id, run: () => entry.doctor(connectorSettings, getJson) });
  }

  let failed = 0;
  for (const check of checks) {
    if (check.skip?.()) continue;
    try {
      const result = await check.run();
      out.write(typeof result === 'string' ? `✓ ${check.name}: ${result}\n` : `! ${check.name}: ${result.warning}\n`);
    } catch (err) {
      failed++;
      out.write(`✗ ${check.name}: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
  if (options.persona !== undefined) failed += await writePersonaTools(out, options.persona, options.catalog, personas('checked'));
  out.write(failed ? `${failed} problem${failed > 1 ? 's' : ''} found\n` : 'all good\n');
  return failed ? 1 : 0;
}

/** Every custom tool folder that could not be loaded, per persona (each problem names the file and the JSON path). */
async function checkCustomTools(
  settings: Settings,
  custom: { problems(persona: Persona): Promise<string[]> },
  personas: readonly Persona[],
): Promise<string | { warning: string }> {
  const problems = [...new Set((await Promise.all(personas.map((p) => custom.problems(p)))).flat())];
  if (problems.length) return { warning: problems.join('; ') };
  return settings.toolsDir ? `every folder loads (shared ones in ${settings.toolsDir})` : 'every folder loads';
}

/** Each MCP server of every mcp.jsonc, started: its state and its tools, on lines of their own below the check. */
async function checkMcp(mcp: Pick<McpToolProvider, 'check'>, personas: readonly Persona[]): Promise<string | { warning: string }> {
  const status = await mcp.check(personas);
  if (!status.servers.length && !status.files.length) return `none declared (in ${status.globalFile} or a persona's mcp.jsonc)`;
  const lines = formatMcpStatus(status);
  const summary = `${status.servers.length} server${status.servers.length === 1 ? '' : 's'}:\n${lines.map((l) => `    ${l}`).join('\n')}`;
  return mcpStatusHasProblems(status) ? { warning: summary } : summary;
}

/** The tools of one persona's turns, per kind of turn; 1 when there is no such persona (or no tool catalog). */
async function writePersonaTools(out: NodeJS.WritableStream, name: string, catalog: ToolCatalog | undefined, personas: readonly Persona[] | undefined): Promise<number> {
  if (!personas) return 0; // The personas check has said why.
  const persona = personas.find((p) => p.name === name);
  if (!persona || !catalog) {
    out.write(`✗ tools of ${name}: there is no persona named "${name}" (the personas are ${personas.map((p) => p.name).join(', ') || 'none'})\n`);
    return 1;
  }
  out.write(`\nTools of persona ${name}, by kind of turn:\n`);
  for (const line of await turnToolsReport(catalog, persona)) out.write(`  ${line}\n`);
  out.write('\n');
  return 0;
}

/** What recall gains from each extension, and does without it; a missing pgvector is no warning (it is optional). */
const EXTENSION_EFFECTS = {
  pg_trgm: { name: 'pg_trgm', with: 'recall matches names and misspellings', without: 'recall ranks by full-text search alone', optional: false },
  vector: {
    name: 'vector',
    with: 'recall finds the rows nearest in meaning by its HNSW index (with an embedding endpoint)',
    without: 'recall compares embeddings in the process (with an embedding endpoint)',
    optional: true,
  },
};

/** Whether the database has the extension (the migrations create it where the server has it). */
function checkExtension(state: ExtensionState, migrated: boolean, effect: (typeof EXTENSION_EFFECTS)['vector']): string | { warning: string } {
  if (state.installed) return `installed: ${effect.with}`;
  if (!state.available) return effect.optional ? `not on this server: ${effect.without}` : { warning: `not on this server: ${effect.without}` };
  if (!migrated) return 'on the server; the first start (or parlor migrate) creates it';
  return { warning: `on the server but not created in this database (a superuser can CREATE EXTENSION ${effect.name} there): ${effect.without}` };
}

/** Tools that act on the machine or the world and that a persona runs without asking. */
function checkApprovals(personas: readonly Persona[], tools: readonly Pick<Tool, 'name' | 'approval'>[]): string | { warning: string } {
  const unasked = unapprovedActions(personas, tools);
  if (unasked.length) return { warning: unasked.join('; ') };
  const asking = tools.filter((t) => t.approval?.byDefault).map((t) => t.name);
  return `every persona asks before ${asking.join(', ') || 'tools that act on the machine'}`;
}

/** Whether commands run sandboxed, and every persona that runs them without a sandbox (or cannot run them). */
function checkShellSandbox(personas: readonly Persona[]): string | { warning: string } {
  const status = shellSandboxStatus();
  const warnings = personas.map((p) => shellAccess(p, status).warning).filter((w): w is string => Boolean(w));
  if (warnings.length) return { warning: `${status.detail}; ${warnings.join('; ')}` };
  return status.available || status.separateUser ? status.detail : `${status.detail}; no persona runs shell_exec`;
}

/**
 * The model endpoint answers, knows the model, and takes the key. A 404 is not "reachable": the commonest cause is a
 * base URL without its `/v1`, which is looked for and named.
 */
async function checkModel(settings: Settings): Promise<string> {
  const llm = requireModel(settings);
  const base = modelEndpoint(llm);
  const modelsUrl = (root: string) => (llm.provider === 'anthropic' ? `${root.replace(/\/v1$/, '')}/v1/models` : `${root}/models`);
  const headers: Record<string, string> =
    llm.provider === 'anthropic'
      ? { 'x-api-key': llm.apiKey ?? '', 'anthropic-version': '2023-06-01' }
      : llm.apiKey
        ? { authorization: `Bearer ${llm.apiKey}` }
        : {};
  const response = await fetchWithTimeout(modelsUrl(base), headers, 'LLM_BASE_URL');
  if (response.status === 401 || response.status === 403) throw new Error(`${base} refused the API key (HTTP ${response.status}); check LLM_API_KEY`);
  if (response.status === 404) {
    if (llm.provider === 'openai' && !/\/v1$/.test(base)) {
      const withV1 = await fetchWithTimeout(modelsUrl(`${base}/v1`), headers, 'LLM_BASE_URL').catch(() => undefined);
      if (withV1?.ok) throw new Error(`${base} has no API there (HTTP 404), but ${base}/v1 has; set LLM_BASE_URL=${base}/v1`);
    }
    throw new Error(`${modelsUrl(base)} answered HTTP 404: this is not an ${llm.provider === 'anthropic' ? 'Anthropic' : 'OpenAI-compatible'} API; check LLM_BASE_URL${llm.provider === 'openai' ? ' (most servers want it to end in /v1)' : ''}`);
  }
  if (!response.ok) throw new Error(`${base} answered HTTP ${response.status}; check LLM_BASE_URL`);
  const listed = ((await response.json().catch(() => ({}))) as { data?: { id?: unknown }[] }).data?.map((m) => m.id).filter((id): id is string => typeof id === 'string') ?? [];
  // A server that lists its models must list this one; some list none, and some serve more than they list.
  if (listed.length > 0 && listed.length < 1000 && !listed.includes(llm.model)) {
    throw new Error(`${base} does not serve a model named "${llm.model}" (it serves ${listed.slice(0, 10).join(', ')}${listed.length > 10 ? ', …' : ''}); check LLM_MODEL`);
  }
  return `${llm.provider} ${llm.model} at ${base} is reachable${listed.includes(llm.model) ? ' and serves the model' : ''}`;
}

/** Whether recall ranks by meaning too: the endpoint is configured and embeds a text. */
async function checkEmbeddings(settings: Settings): Promise<string> {
  const configured = settings.embeddings;
  if (!configured) return 'not configured: recall ranks by words (set EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL to rank by meaning too)';
  const client = createEmbeddingClient(configured);
  let vector: number[];
  try {
    [vector] = await client.embed(['parlor doctor'], { timeoutMs: TIMEOUT_MS });
  } catch (err) {
    const status = (err as EmbeddingError).status;
    const hint = status === 401 || status === 403 ? 'check EMBEDDINGS_API_KEY' : status === 404 ? 'check EMBEDDINGS_BASE_URL (most servers want it to end in /v1) and EMBEDDINGS_MODEL' : 'check EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL';
    throw new Error(`${(err as Error).message}; ${hint} (until then recall ranks by words)`, { cause: err });
  }
  return `${configured.model} at ${configured.baseUrl} embeds (${vector.length} dimensions)`;
}

async function fetchWithTimeout(url: string, headers: Record<string, string>, variable: string): Promise<Response> {
  try {
    return await fetch(url, { headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    throw new ConfigError(`cannot reach ${new URL(url).origin} (${describeError((err as { cause?: unknown }).cause ?? err)}); check ${variable} and the network`);
  }
}

async function getJson(url: string, headers: Record<string, string>, variable: string): Promise<any> {
  const response = await fetchWithTimeout(url, headers, variable);
  return response.json().catch(() => ({}));
}
