import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { parse as parseJsonc, printParseErrorCode, stripComments, type ParseError } from 'jsonc-parser';
import { ConfigError } from '#src/config/errors.ts';
import { describeSchemaError } from '#src/config/persona.ts';

/** What an MCP server may be called: it becomes part of its tools' names (`mcp_<server>_<tool>`). */
export const SERVER_NAME = /^[a-z][a-z0-9_]*$/;
const MAX_SERVER_NAME = 32;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const DEFAULT_TIMEOUT_SECONDS = 60;

/** One server as an `mcp.jsonc` declares it; `$NAME` references are not resolved yet. */
export interface McpServerEntry {
  name: string;
  /** The `mcp.jsonc` it is declared in. */
  file: string;
  /** Absent only for a `"disabled": true` entry that turns off a global server of the same name. */
  transport?: 'stdio' | 'http';
  command?: string;
  args: string[];
  env: Record<string, string>;
  /** Absolute: a relative `cwd` is taken from the file's folder, which is also the default. */
  cwd: string;
  url?: string;
  headers: Record<string, string>;
  allow?: string[];
  deny: string[];
  timeoutSeconds: number;
  disabled: boolean;
}

interface ServerJson {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  url?: string;
  headers?: Record<string, string>;
  allow?: string[];
  deny?: string[];
  timeoutSeconds?: number;
  disabled?: boolean;
}

const stringList = { type: 'array', items: { type: 'string', minLength: 1 } };
const stringRecord = { type: 'object', additionalProperties: { type: 'string' } };
const serverSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    command: { type: 'string', minLength: 1 },
    args: { type: 'array', items: { type: 'string' } },
    env: stringRecord,
    cwd: { type: 'string', minLength: 1 },
    url: { type: 'string', minLength: 1 },
    headers: stringRecord,
    allow: stringList,
    deny: stringList,
    timeoutSeconds: { type: 'number', exclusiveMinimum: 0, maximum: 3600 },
    disabled: { type: 'boolean' },
  },
};
const fileSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { servers: { type: 'object', additionalProperties: serverSchema } },
};

/** Reads and checks `mcp.jsonc` files; one per provider, so no schema is compiled at import time. */
export function createMcpFileReader(): (file: string) => McpServerEntry[] {
  const validate = new Ajv({ allErrors: false, strict: true }).compile(fileSchema);
  return (file) => {
    const text = readText(file);
    if (text === undefined || stripComments(text).trim() === '') return [];
    const errors: ParseError[] = [];
    const data = parseJsonc(text, errors, { allowTrailingComma: true, disallowComments: false });
    if (errors.length) {
      const { line, column } = position(text, errors[0].offset);
      const code = printParseErrorCode(errors[0].error).replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
      throw new ConfigError(`${file}:${line}:${column}: invalid JSONC (${code})`);
    }
    if (data === undefined) return [];
    if (!validate(data)) throw new ConfigError(`${file}: ${describeSchemaError(validate.errors?.[0])}`);
    const servers = (data as { servers?: Record<string, ServerJson> }).servers ?? {};
    return Object.entries(servers).map(([name, json]) => checkServer(file, name, json));
  };
}

function checkServer(file: string, name: string, json: ServerJson): McpServerEntry {
  const at = `${file}: /servers/${name}`;
  if (!SERVER_NAME.test(name) || name.length > MAX_SERVER_NAME) {
    throw new ConfigError(
      `${at}: a server name starts with a lowercase letter and uses lowercase letters, digits and _ (at most ${MAX_SERVER_NAME}), because it becomes part of tool names (mcp_<server>_<tool>)`,
    );
  }
  const disabled = json.disabled ?? false;
  if (json.command !== undefined && json.url !== undefined) throw new ConfigError(`${at} has both "command" and "url"; a server is either a program to start or an HTTP endpoint`);
  if (json.command === undefined && json.url === undefined && !disabled) {
    throw new ConfigError(`${at} needs "command" (a program that speaks MCP on stdio) or "url" (a streamable HTTP endpoint)`);
  }
  const transport = json.command !== undefined ? 'stdio' : json.url !== undefined ? 'http' : undefined;
  const misplaced =
    transport === 'stdio' ? (['headers'] as const).find((k) => json[k] !== undefined) : (['args', 'env', 'cwd'] as const).find((k) => json[k] !== undefined);
  if (transport && misplaced) {
    throw new ConfigError(`${at}/${misplaced} is for ${transport === 'stdio' ? '"url"' : '"command"'} servers; this one has ${transport === 'stdio' ? '"command"' : '"url"'}`);
  }
  if (json.url !== undefined && !(URL.canParse(json.url) && /^https?:$/.test(new URL(json.url).protocol))) {
    throw new ConfigError(`${at}/url ${JSON.stringify(json.url)} is not an http:// or https:// URL`);
  }
  const badEnv = Object.keys(json.env ?? {}).find((k) => !ENV_NAME.test(k));
  if (badEnv !== undefined) throw new ConfigError(`${at}/env: ${JSON.stringify(badEnv)} is not an environment variable name`);
  return {
    name,
    file,
    transport,
    command: json.command,
    args: json.args ?? [],
    env: json.env ?? {},
    cwd: path.resolve(path.dirname(file), json.cwd ?? '.'),
    url: json.url,
    headers: json.headers ?? {},
    allow: json.allow,
    deny: json.deny ?? [],
    timeoutSeconds: json.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS,
    disabled,
  };
}

/** Where `$NAME` values come from, and how to say that one is missing. */
export interface SecretSource {
  values: Readonly<Record<string, string | undefined>>;
  /** Completes "names the secret X, which ...": `is not in /p/ana/.env`. */
  missing: string;
}

const REFERENCE = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

/**
 * Replaces `$NAME` and `${NAME}` with secrets (`$$` is a literal `$`); a reference to a missing secret is a
 * ConfigError naming the file and JSON path. The values used are added to `used` (to be masked in messages).
 */
export function resolveSecrets(text: string, source: SecretSource, where: string, used: string[] = []): string {
  return text.replace(REFERENCE, (match, braced?: string, bare?: string) => {
    if (match === '$$') return '$';
    const name = (braced ?? bare)!;
    const value = source.values[name];
    if (value === undefined) throw new ConfigError(`${where} names the secret ${name}, which ${source.missing}`);
    used.push(value);
    return value;
  });
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw new ConfigError(`${file} cannot be read (${code === 'EISDIR' ? 'it is a directory' : (err as Error).message})`);
  }
}

function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: before[before.length - 1].length + 1 };
}
