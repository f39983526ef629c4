import fs from 'node:fs';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { CronExpressionParser } from 'cron-parser';
import { closest, distance } from 'fastest-levenshtein';
import { parse as parseJsonc, printParseErrorCode, stripComments, type ParseError } from 'jsonc-parser';
import { parseEnvText } from './env.ts';
import { ConfigError } from './errors.ts';
import { connectorsSchema, schedulesSchema, toolsSchema } from './persona-schemas.ts';

export interface Destination {
  connector: string;
  to: string;
  thread?: string;
}

export interface ChannelConfig {
  connector: string;
  chat: string;
  thread?: string;
  /** Answer only when mentioned or replied to. */
  mention: boolean;
}

export interface ScheduleEntry {
  name: string;
  type: 'heartbeat' | 'cron';
  cron: string;
  prompt: string;
  fresh?: boolean;
  enabled?: boolean;
  deliver?: Destination;
}

export interface Persona {
  name: string;
  dir: string;
  soul: string;
  heartbeat?: string;
  isDefault: boolean;
  /** `connector:id` addresses allowed to DM the persona. */
  users: string[];
  approvers: string[];
  primary?: Destination;
  channels: ChannelConfig[];
  /** Other personas that may write to this one (send_to_persona, ask_persona). */
  personas: string[];
  tools: {
    deny: string[];
    approve: string[];
    /** Tools that ask first by default (they act on the machine or the world) and that this persona runs unasked. */
    allow: string[];
    /** Custom and MCP tools callable from the start of every turn, without tool_activate. */
    activate: string[];
    thinking: boolean;
    /** A user turn's answer grows in one message as the model writes it, where the connector can do that. */
    stream: boolean;
    model?: string;
    maxIterations?: number;
    turnTimeoutSeconds?: number;
    approvalTimeoutSeconds?: number;
    /** How commands run: in the sandbox (the default), or, by the owner's explicit choice, without one. */
    shell: 'sandboxed' | 'unsandboxed';
    subagents: SubagentLimits;
    /** Hosts web_fetch may reach even when they resolve to a private or loopback address. */
    web: { allowHosts: string[] };
    /** At most this many background commands run at once for the persona. */
    processes: { max: number };
  };
  schedules: ScheduleEntry[];
  /** Persona secrets from its `.env`: handed to tools by name, never shown to the model. */
  secrets: Record<string, string>;
  workspace: string;
  skills: { name: string; description: string; file: string }[];
}

/** What a persona's background tasks (spawn_subagent) may do; each limit is refused with a clear tool result. */
export interface SubagentLimits {
  /** How deep tasks nest: 1, a task cannot start tasks of its own. */
  maxDepth: number;
  /** Tasks one turn may start. */
  perTurn: number;
  /** Tasks of the persona running at once; the rest wait their turn. */
  running: number;
  /** Model calls a task may make. */
  maxIterations: number;
  /** How long a task may run. */
  timeoutSeconds: number;
}

/** Background commands a persona may have running at once, unless its tools.jsonc says otherwise. */
export const PROCESS_DEFAULT_MAX = 4;

export const SUBAGENT_DEFAULTS: SubagentLimits = { maxDepth: 1, perTurn: 5, running: 4, maxIterations: 20, timeoutSeconds: 600 };

const ajv = new Ajv({ allErrors: false, strict: true });
const validateConnectors = ajv.compile(connectorsSchema);
const validateTools = ajv.compile(toolsSchema);
const validateSchedules = ajv.compile(schedulesSchema);

/** What a persona folder may be called. */
export const PERSONA_NAME = /^[a-z0-9][a-z0-9_-]*$/;

export interface LoadOptions {
  /**
   * The connector ids a persona may name (in `users`, `approvers`, `primary`, `channels` and schedule deliveries):
   * every connector of this deployment, whether or not its token is set. Absent: the names are not checked.
   */
  connectors?: readonly string[];
}

/** Loads every persona folder under `dir`. Any problem is a ConfigError naming the file and JSON path. */
export function loadPersonas(dir: string, options: LoadOptions = {}): Persona[] {
  const kind = fileKind(dir);
  if (kind === 'missing') {
    throw new ConfigError(`personas folder ${dir} does not exist; create it with one folder per persona, or set PARLOR_PERSONAS_DIR`);
  }
  if (kind !== 'directory') throw new ConfigError(`personas folder ${dir} ${describeKind(dir, kind)}; it must be a folder with one folder per persona`);
  const personas = fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => !e.name.startsWith('.') && (e.isDirectory() || (e.isSymbolicLink() && personaLink(path.join(dir, e.name)))))
    .map((e) => loadPersona(path.join(dir, e.name), options));
  if (personas.length === 0) {
    throw new ConfigError(`no personas in ${dir}; add a folder with a SOUL.md (see personas/assistant in the Parlor repository)`);
  }
  const defaults = personas.filter((p) => p.isDefault);
  if (defaults.length > 1) {
    throw new ConfigError(`more than one persona is marked "default": true (${defaults.map((p) => p.name).join(', ')}); keep one`);
  }
  return personas;
}

export function loadPersona(dir: string, options: LoadOptions = {}): Persona {
  const name = path.basename(dir);
  if (!PERSONA_NAME.test(name)) {
    throw new ConfigError(`${dir}: persona folder names use lowercase letters, digits, - and _ (got "${name}")`);
  }
  const soulFile = path.join(dir, 'SOUL.md');
  const soulText = readConfigFile(soulFile);
  if (soulText === undefined) throw new ConfigError(`${soulFile} is missing; every persona needs a SOUL.md saying who it is`);
  const soul = soulText.trim();
  if (!soul) throw new ConfigError(`${soulFile} is empty; say who the persona is`);

  const connectors = readJsonc(path.join(dir, 'connectors.jsonc'), validateConnectors, {}) as {
    default?: boolean;
    users?: string[];
    approvers?: string[];
    primary?: Destination;
    channels?: (Omit<ChannelConfig, 'mention'> & { mention?: boolean })[];
    personas?: string[];
  };
  const tools = readJsonc(path.join(dir, 'tools.jsonc'), validateTools, {}) as Partial<Persona['tools']>;
  const schedules = loadSchedules(dir);

  const envFile = path.join(dir, '.env');
  let secrets: Record<string, string> = {};
  const envText = readConfigFile(envFile);
  if (envText !== undefined) {
    try {
      secrets = parseEnvText(envText);
    } catch (err) {
      throw new ConfigError(`${envFile}: cannot be parsed (${(err as Error).message})`);
    }
  }

  const users = connectors.users ?? [];
  const persona: Persona = {
    name,
    dir,
    soul,
    heartbeat: readConfigFile(path.join(dir, 'HEARTBEAT.md'))?.trim(),
    isDefault: connectors.default ?? false,
    users,
    approvers: connectors.approvers ?? users,
    primary: connectors.primary,
    channels: (connectors.channels ?? []).map((c) => ({ ...c, mention: c.mention ?? true })),
    personas: connectors.personas ?? [],
    tools: {
      deny: tools.deny ?? [],
      approve: tools.approve ?? [],
      allow: tools.allow ?? [],
      activate: tools.activate ?? [],
      thinking: tools.thinking ?? false,
      stream: tools.stream ?? false,
      model: tools.model,
      maxIterations: tools.maxIterations,
      turnTimeoutSeconds: tools.turnTimeoutSeconds,
      approvalTimeoutSeconds: tools.approvalTimeoutSeconds,
      shell: tools.shell ?? 'sandboxed',
      subagents: { ...SUBAGENT_DEFAULTS, ...tools.subagents },
      web: { allowHosts: tools.web?.allowHosts ?? [] },
      processes: { max: tools.processes?.max ?? PROCESS_DEFAULT_MAX },
    },
    schedules,
    secrets,
    workspace: path.join(dir, 'workspace'),
    skills: loadSkills(path.join(dir, 'skills')),
  };
  if (options.connectors) checkPersonaConnectors(persona, options.connectors);
  return persona;
}

/**
 * Every connector the persona's files name (in `users`, `approvers`, `primary`, `channels` and schedule
 * deliveries) is one of `known`; otherwise a ConfigError names the file, the JSON path and the nearest known id.
 */
export function checkPersonaConnectors(persona: Persona, known: readonly string[]): void {
  const file = path.join(persona.dir, 'connectors.jsonc');
  // Users first: approvers default to them, and a typo is reported where it was written.
  for (const field of ['users', 'approvers'] as const) {
    persona[field].forEach((address, i) => {
      const id = address.slice(0, address.indexOf(':'));
      if (!known.includes(id)) throw new ConfigError(`${file}: /${field}/${i} ${JSON.stringify(address)} names no connector ${JSON.stringify(id)} ${knownHint(id, known)}`);
    });
  }
  if (persona.primary) checkConnectorField(file, '/primary/connector', persona.primary.connector, known);
  persona.channels.forEach((channel, i) => checkConnectorField(file, `/channels/${i}/connector`, channel.connector, known));
  persona.schedules.forEach((entry, i) => {
    if (entry.deliver) checkConnectorField(path.join(persona.dir, 'schedules.jsonc'), `/${i}/deliver/connector`, entry.deliver.connector, known);
  });
}

/** Whether a `connector:id` address is one of the persona's own people (a user or an approver). */
export function isPersonaPerson(persona: Persona, address: string | undefined): boolean {
  return address !== undefined && (persona.users.includes(address) || persona.approvers.includes(address));
}

/** Whether a chat is one of the persona's own: its primary, one of its channels, or a DM with one of its users. */
export function isPersonaChat(persona: Persona, target: { connector: string; chat: string }): boolean {
  if (persona.primary && persona.primary.connector === target.connector && persona.primary.to === target.chat) return true;
  if (persona.channels.some((c) => c.connector === target.connector && c.chat === target.chat)) return true;
  return persona.users.includes(`${target.connector}:${target.chat}`);
}

/** A persona's `schedules.jsonc`, checked: schema, unique names, 5-field cron expressions. */
export function loadSchedules(dir: string): ScheduleEntry[] {
  const file = path.join(dir, 'schedules.jsonc');
  return checkSchedules(file, readJsonc(file, validateSchedules, []) as ScheduleEntry[]);
}

/** Checks schedule entries as parsed data (what `loadSchedules` checks after the schema); throws a ConfigError. */
export function checkSchedules(file: string, schedules: unknown): ScheduleEntry[] {
  if (!validateSchedules(schedules)) throw new ConfigError(`${file}: ${describeSchemaError(validateSchedules.errors?.[0])}`);
  const entries = schedules as ScheduleEntry[];
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    if (seen.has(entry.name)) throw new ConfigError(`${file}: /${i}/name "${entry.name}" is used twice; names must be unique`);
    seen.add(entry.name);
    const cronProblem = checkCron(entry.cron);
    if (cronProblem) throw new ConfigError(`${file}: /${i}/cron "${entry.cron}" ${cronProblem}`);
  });
  return entries;
}

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

function readJsonc(file: string, validate: Validator, fallback: unknown): unknown {
  const text = readConfigFile(file);
  if (text === undefined || holdsNoValue(text)) return fallback;
  const errors: ParseError[] = [];
  const data = parseJsonc(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length) {
    const { line, column } = position(text, errors[0].offset);
    throw new ConfigError(`${file}:${line}:${column}: ${describeParseError(errors[0])}`);
  }
  if (data === undefined) return fallback;
  if (!validate(data)) throw new ConfigError(`${file}: ${describeSchemaError(validate.errors?.[0])}`);
  return data;
}

type FileKind = 'missing' | 'file' | 'directory' | 'dangling' | 'other';

/** What is at `file`, following symlinks; a symlink whose target is gone is `dangling`, not missing. */
function fileKind(file: string): FileKind {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ConfigError(`${file} cannot be read (${(err as Error).message})`);
    try {
      return fs.lstatSync(file).isSymbolicLink() ? 'dangling' : 'missing';
    } catch {
      return 'missing';
    }
  }
  return stat.isFile() ? 'file' : stat.isDirectory() ? 'directory' : 'other';
}

function describeKind(file: string, kind: FileKind): string {
  switch (kind) {
    case 'directory':
      return 'is a directory';
    case 'dangling':
      return `is a symlink to ${fs.readlinkSync(file)}, which does not exist`;
    case 'other':
      return 'is not a regular file';
    default:
      return `is a ${kind}`;
  }
}

/**
 * The text of an optional persona file, or undefined when there is none. Anything else that is not a readable
 * file (a directory, a symlink to nothing, a FIFO that would block the read) is a ConfigError naming it.
 */
function readConfigFile(file: string): string | undefined {
  const kind = fileKind(file);
  if (kind === 'missing') return undefined;
  if (kind !== 'file') throw new ConfigError(`${file} ${describeKind(file, kind)}; ${kind === 'dangling' ? 'point it at a file or remove it' : 'it must be a file'}`);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${file} cannot be read (${(err as Error).message})`);
  }
}

/** A symlink in the personas folder is a persona when it leads to a folder; one that leads nowhere is an error. */
function personaLink(link: string): boolean {
  const kind = fileKind(link);
  if (kind === 'dangling') throw new ConfigError(`persona folder ${link} ${describeKind(link, kind)}`);
  return kind === 'directory';
}

function checkConnectorField(file: string, pointer: string, id: string, known: readonly string[]): void {
  if (!known.includes(id)) throw new ConfigError(`${file}: ${pointer} ${JSON.stringify(id)} is no connector ${knownHint(id, known)}`);
}

/** `(known: a, b; did you mean "c"?)` */
function knownHint(id: string, known: readonly string[]): string {
  const names = [...new Set(known)].sort();
  if (names.length === 0) return '(no connectors are known)';
  const nearest = closest(id, names);
  const near = distance(id, nearest) <= Math.max(2, Math.floor(id.length / 3));
  return `(known: ${names.join(', ')}${near ? `; did you mean ${JSON.stringify(nearest)}?` : ''})`;
}

/** An empty or comments-only file means "nothing configured", like a missing one. */
function holdsNoValue(text: string): boolean {
  return stripComments(text).trim() === '';
}

function describeParseError(error: ParseError): string {
  const code = printParseErrorCode(error.error);
  return `invalid JSONC (${code.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase()})`;
}

export function describeSchemaError(error: ErrorObject | undefined): string {
  if (!error) return 'does not match the expected shape';
  const where = error.instancePath || '/';
  switch (error.keyword) {
    case 'additionalProperties':
      return `${where}: unknown key "${(error.params as { additionalProperty: string }).additionalProperty}"`;
    case 'enum':
      return `${where} must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'pattern':
      return `${where} ${error.instancePath.includes('users') || error.instancePath.includes('approvers') ? 'must look like "<connector>:<user id>"' : `must match ${(error.params as { pattern: string }).pattern}`}`;
    default:
      return `${where} ${error.message}`;
  }
}

function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: before[before.length - 1].length + 1 };
}

/** A 5-field cron expression (minute resolution), checked by the parser pg-boss schedules with. */
export function checkCron(expr: string): string | undefined {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5) return `has ${fields.length} fields; use 5 (minute hour day-of-month month day-of-week), e.g. "0 9 * * *"`;
  try {
    CronExpressionParser.parse(expr, { strict: false });
    return undefined;
  } catch (err) {
    return `is not a valid cron expression (${(err as Error).message})`;
  }
}

function loadSkills(dir: string): Persona['skills'] {
  const kind = fileKind(dir);
  if (kind === 'missing') return [];
  if (kind !== 'directory') throw new ConfigError(`${dir} ${describeKind(dir, kind)}; it must be a folder with one folder per skill`);
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .map((e) => ({ e, text: e.isDirectory() ? readConfigFile(path.join(dir, e.name, 'SKILL.md')) : undefined }))
    .filter((s): s is { e: fs.Dirent; text: string } => s.text !== undefined)
    .map(({ e, text }) => {
      const file = path.join(dir, e.name, 'SKILL.md');
      const description = /^description:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? text.split('\n').find((l) => l.trim() && !l.startsWith('---'))?.trim() ?? '';
      return { name: e.name, description, file };
    });
}
