// A custom tool's `tool.json`: read, checked against its schema, and its `parameters` checked as a JSON Schema, so
// that every problem is found when the folder is loaded, named by file and JSON path, rather than at a call.
import fs from 'node:fs/promises';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { BACKGROUND_KINDS, type TurnKind } from '#src/turns.ts';

export const DEFAULT_TIMEOUT_SECONDS = 30;
export const MAX_TIMEOUT_SECONDS = 600;
const TOOL_NAME = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
// Over lines too: the command expands `{{ name }}` with any white space inside, new lines included.
const PLACEHOLDER = /\{\{([\s\S]*?)\}\}/g;
const PARAMETER_NAME = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*$/;

/** A checked `tool.json`. */
export interface ToolManifest {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  timeoutSeconds: number;
  approve: boolean;
  contexts?: TurnKind[];
  secrets: string[];
  /** A shell template (`dig +short {{domain}}`), or the real path of an executable in the folder. */
  how: { command: string } | { run: string };
}

const manifestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'parameters'],
  properties: {
    $schema: { type: 'string' },
    name: { type: 'string', pattern: TOOL_NAME.source, maxLength: 64 },
    description: { type: 'string', minLength: 1 },
    // Its content is checked against the JSON Schema meta-schema below; tool arguments are always an object.
    parameters: { type: 'object', required: ['type'], properties: { type: { const: 'object' } } },
    timeout: { type: 'number', exclusiveMinimum: 0, maximum: MAX_TIMEOUT_SECONDS },
    approve: { type: 'boolean' },
    contexts: { type: 'array', minItems: 1, uniqueItems: true, items: { enum: ['user', ...BACKGROUND_KINDS] } },
    secrets: { type: 'array', uniqueItems: true, items: { type: 'string', pattern: ENV_NAME.source } },
    command: { type: 'string', minLength: 1 },
    run: { type: 'string', minLength: 1 },
  },
};

const ajv = new Ajv({ allErrors: false, strict: true });
const validateManifest = ajv.compile(manifestSchema);

/**
 * `parameters` compiled as the ToolRunner will compile it, but strict about keywords: a misspelt `requried` would
 * otherwise be ignored in silence, and an unknown `format` is not checked by the runner at all.
 */
const schemaChecker = new Ajv({ allErrors: false, strict: true, strictTypes: false, strictTuples: false, strictRequired: false, logger: false });

/** The folder's `tool.json`, checked; or the problem, naming the file and the JSON path. */
export async function readManifest(folder: string, reservedNames: ReadonlySet<string>): Promise<{ manifest: ToolManifest } | { problem: string }> {
  const file = path.join(folder, 'tool.json');
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { problem: code === 'ENOENT' ? `${folder} has no tool.json; each folder in a tools folder is one tool` : `${file} cannot be read (${(err as Error).message})` };
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    return { problem: `${file}: not valid JSON (${(err as Error).message})` };
  }
  const fail = (message: string) => ({ problem: `${file}: ${message}` });
  if (!validateManifest(data)) return fail(describeError(validateManifest.errors?.[0], ''));
  const raw = data as {
    name: string;
    description: string;
    parameters: Record<string, unknown>;
    timeout?: number;
    approve?: boolean;
    contexts?: TurnKind[];
    secrets?: string[];
    command?: string;
    run?: string;
  };
  if (reservedNames.has(raw.name)) return fail(`/name "${raw.name}" is the name of a built-in tool; choose another`);
  // MCP tools are named mcp_<server>_<tool>, and group:mcp:<server> must cover every one of them.
  if (raw.name.startsWith('mcp_')) return fail(`/name "${raw.name}" starts with mcp_, which MCP servers' tools are named with; choose another`);
  if ((raw.command === undefined) === (raw.run === undefined)) {
    return fail(`give exactly one of "command" (a shell command with {{parameter}} placeholders) and "run" (an executable in ${folder})`);
  }

  const parameterProblem = checkParameters(raw.parameters);
  if (parameterProblem) return fail(parameterProblem);

  let how: ToolManifest['how'];
  if (raw.command !== undefined) {
    const placeholderProblem = checkPlaceholders(raw.command, raw.parameters);
    if (placeholderProblem) return fail(placeholderProblem);
    how = { command: raw.command };
  } else {
    const executable = await findExecutable(folder, raw.run!);
    if ('problem' in executable) return fail(executable.problem);
    how = { run: executable.file };
  }
  return {
    manifest: {
      name: raw.name,
      description: raw.description,
      parameters: raw.parameters,
      timeoutSeconds: raw.timeout ?? DEFAULT_TIMEOUT_SECONDS,
      approve: raw.approve ?? false,
      ...(raw.contexts ? { contexts: raw.contexts } : {}),
      secrets: raw.secrets ?? [],
      how,
    },
  };
}

/** The names `{{...}}` in a command template refers to, in order. */
export function placeholderNames(command: string): string[] {
  return [...command.matchAll(PLACEHOLDER)].map((match) => PARAMETER_NAME.exec(match[1]!)?.[1] ?? match[1]!);
}

/** `parameters` is a JSON Schema the runner can compile; what is wrong with it, or undefined. */
function checkParameters(parameters: Record<string, unknown>): string | undefined {
  // The runner compiles every version of a tool in one place, where a second schema with the same $id is refused.
  const id = findKey(parameters, '$id', '/parameters');
  if (id) return `${id} is not supported in a tool's parameters; remove it`;
  try {
    // Throws for a `$schema` it does not know (draft 2020-12): said as a problem below.
    if (!schemaChecker.validateSchema(parameters)) return describeError(schemaChecker.errors?.[0], '/parameters');
    schemaChecker.compile(parameters);
  } catch (err) {
    return `/parameters is not a schema that can be used (${(err as Error).message})`;
  } finally {
    // A tool's schema changes as its folder is edited: the checker keeps none of them.
    schemaChecker.removeSchema(parameters);
  }
  return undefined;
}

function checkPlaceholders(command: string, parameters: Record<string, unknown>): string | undefined {
  const known = Object.keys((parameters.properties as Record<string, unknown> | undefined) ?? {});
  for (const match of command.matchAll(PLACEHOLDER)) {
    const name = PARAMETER_NAME.exec(match[1]!)?.[1];
    if (!name) return `/command: "${match[0]}" is not a placeholder; write {{name}} with a parameter's name`;
    // A quoted value put inside quotes of the template's own would end them: the value could then run as code.
    if (quotedAt(command, match.index!)) return `/command: {{${name}}} is inside quotes; write it without them (each value is quoted for the shell already)`;
    if (!known.includes(name)) {
      return `/command: {{${name}}} names no parameter (${known.length ? `the parameters are ${known.join(', ')}` : 'there are no parameters'}); add it to /parameters/properties`;
    }
  }
  return undefined;
}

/** Whether `at` in a shell command is inside single or double quotes. */
function quotedAt(command: string, at: number): boolean {
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < at; i++) {
    const ch = command[i];
    if (quote === "'") {
      if (ch === "'") quote = undefined;
    } else if (ch === '\\') {
      i++;
    } else if (ch === quote) {
      quote = undefined;
    } else if (!quote && (ch === "'" || ch === '"')) {
      quote = ch;
    }
  }
  return quote !== undefined;
}

/** `run` names an executable file inside the folder (its real path), or what is wrong. */
async function findExecutable(folder: string, given: string): Promise<{ file: string } | { problem: string }> {
  if (path.isAbsolute(given)) return { problem: `/run "${given}" must be a path inside the tool's folder, like "./run.sh"` };
  const realFolder = await fs.realpath(folder);
  let file: string;
  try {
    file = await fs.realpath(path.join(realFolder, given));
  } catch {
    return { problem: `/run "${given}" does not exist in ${folder}` };
  }
  const relative = path.relative(realFolder, file);
  if (!relative || relative.startsWith('..') || path.isAbsolute(relative)) {
    return { problem: `/run "${given}" leads outside the tool's folder; the sandbox shows only that folder` };
  }
  const stat = await fs.stat(file);
  if (!stat.isFile()) return { problem: `/run "${given}" is not a file` };
  if ((stat.mode & 0o111) === 0) return { problem: `/run "${given}" is not executable (chmod +x ${file})` };
  return { file };
}

function findKey(value: unknown, key: string, at: string): string | undefined {
  if (!value || typeof value !== 'object') return undefined;
  for (const [name, child] of Object.entries(value)) {
    const where = `${at}/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (name === key) return where;
    const found = findKey(child, key, where);
    if (found) return found;
  }
  return undefined;
}

function describeError(error: ErrorObject | undefined, prefix: string): string {
  if (!error) return `${prefix || '/'} does not match the expected shape`;
  const where = `${prefix}${error.instancePath}` || '/';
  switch (error.keyword) {
    case 'additionalProperties':
      return `${where}: unknown key "${(error.params as { additionalProperty: string }).additionalProperty}"`;
    case 'required':
      return `${where}: missing "${(error.params as { missingProperty: string }).missingProperty}"`;
    case 'enum':
      return `${where} must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${where} must be ${JSON.stringify((error.params as { allowedValue: unknown }).allowedValue)}`;
    case 'pattern':
      return where === '/name' ? `${where} must be snake_case (lowercase letters, digits and _), like "dns_lookup"` : `${where} must match ${(error.params as { pattern: string }).pattern}`;
    default:
      return `${where} ${error.message}`;
  }
}
