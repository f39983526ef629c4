import fs from 'node:fs';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { CronExpressionParser } from 'cron-parser';
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
  tools: {
    deny: string[];
    approve: string[];
    thinking: boolean;
    model?: string;
    maxIterations?: number;
    turnTimeoutSeconds?: number;
    approvalTimeoutSeconds?: number;
    /** How commands run: in the sandbox (the default), or, by the owner's explicit choice, without one. */
    shell: 'sandboxed' | 'unsandboxed';
  };
  schedules: ScheduleEntry[];
  /** Persona secrets from its `.env`: handed to tools by name, never shown to the model. */
  secrets: Record<string, string>;
  workspace: string;
  skills: { name: string; description: string; file: string }[];
}

const ajv = new Ajv({ allErrors: false, strict: true });
const validateConnectors = ajv.compile(connectorsSchema);
const validateTools = ajv.compile(toolsSchema);
const validateSchedules = ajv.compile(schedulesSchema);

const NAME = /^[a-z0-9][a-z0-9_-]*$/;

/** Loads every persona folder under `dir`. Any problem is a ConfigError naming the file and JSON path. */
export function loadPersonas(dir: string): Persona[] {
  if (!fs.existsSync(dir)) {
    throw new ConfigError(`personas folder ${dir} does not exist; create it with one folder per persona, or set PARLOR_PERSONAS_DIR`);
  }
  const personas = fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => loadPersona(path.join(dir, e.name)));
  if (personas.length === 0) {
    throw new ConfigError(`no personas in ${dir}; add a folder with a SOUL.md (see personas/assistant in the Parlor repository)`);
  }
  const defaults = personas.filter((p) => p.isDefault);
  if (defaults.length > 1) {
    throw new ConfigError(`more than one persona is marked "default": true (${defaults.map((p) => p.name).join(', ')}); keep one`);
  }
  return personas;
}

export function loadPersona(dir: string): Persona {
  const name = path.basename(dir);
  if (!NAME.test(name)) {
    throw new ConfigError(`${dir}: persona folder names use lowercase letters, digits, - and _ (got "${name}")`);
  }
  const soulFile = path.join(dir, 'SOUL.md');
  if (!fs.existsSync(soulFile)) throw new ConfigError(`${soulFile} is missing; every persona needs a SOUL.md saying who it is`);
  const soul = fs.readFileSync(soulFile, 'utf8').trim();
  if (!soul) throw new ConfigError(`${soulFile} is empty; say who the persona is`);

  const connectors = readJsonc(path.join(dir, 'connectors.jsonc'), validateConnectors, {}) as {
    default?: boolean;
    users?: string[];
    approvers?: string[];
    primary?: Destination;
    channels?: (Omit<ChannelConfig, 'mention'> & { mention?: boolean })[];
  };
  const tools = readJsonc(path.join(dir, 'tools.jsonc'), validateTools, {}) as Partial<Persona['tools']>;
  const schedules = loadSchedules(dir);

  const envFile = path.join(dir, '.env');
  let secrets: Record<string, string> = {};
  if (fs.existsSync(envFile)) {
    try {
      secrets = parseEnvText(fs.readFileSync(envFile, 'utf8'));
    } catch (err) {
      throw new ConfigError(`${envFile}: cannot be parsed (${(err as Error).message})`);
    }
  }

  const heartbeatFile = path.join(dir, 'HEARTBEAT.md');
  const users = connectors.users ?? [];
  return {
    name,
    dir,
    soul,
    heartbeat: fs.existsSync(heartbeatFile) ? fs.readFileSync(heartbeatFile, 'utf8').trim() : undefined,
    isDefault: connectors.default ?? false,
    users,
    approvers: connectors.approvers ?? users,
    primary: connectors.primary,
    channels: (connectors.channels ?? []).map((c) => ({ ...c, mention: c.mention ?? true })),
    tools: {
      deny: tools.deny ?? [],
      approve: tools.approve ?? [],
      thinking: tools.thinking ?? false,
      model: tools.model,
      maxIterations: tools.maxIterations,
      turnTimeoutSeconds: tools.turnTimeoutSeconds,
      approvalTimeoutSeconds: tools.approvalTimeoutSeconds,
      shell: tools.shell ?? 'sandboxed',
    },
    schedules,
    secrets,
    workspace: path.join(dir, 'workspace'),
    skills: loadSkills(path.join(dir, 'skills')),
  };
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
  if (!fs.existsSync(file)) return fallback;
  const text = fs.readFileSync(file, 'utf8');
  if (holdsNoValue(text)) return fallback;
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
      return `${where} ${error.instancePath.includes('users') || error.instancePath.includes('approvers') ? 'must look like "telegram:123456789"' : `must match ${(error.params as { pattern: string }).pattern}`}`;
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
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && fs.existsSync(path.join(dir, e.name, 'SKILL.md')))
    .map((e) => {
      const file = path.join(dir, e.name, 'SKILL.md');
      const text = fs.readFileSync(file, 'utf8');
      const description = /^description:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? text.split('\n').find((l) => l.trim() && !l.startsWith('---'))?.trim() ?? '';
      return { name: e.name, description, file };
    });
}
