import { createHash } from 'node:crypto';
import type { Ajv } from 'ajv';

const MAX_TOOL_NAME = 64;

/** `mcp_<server>_<tool>` in `[a-z0-9_]`, at most 64 characters (a long one ends in a hash of the original). */
export function parlorToolName(server: string, tool: string): string {
  const full = `mcp_${server}_${snakeCase(tool)}`;
  return full.length <= MAX_TOOL_NAME ? full : withHash(full, tool);
}

/** The same name made distinct from others (two MCP names that read the same once sanitized). */
export function distinctToolName(name: string, server: string, tool: string): string {
  return withHash(name, `${server}/${tool}`);
}

function withHash(name: string, source: string): string {
  const hash = createHash('sha256').update(source).digest('hex').slice(0, 8);
  return `${name.slice(0, MAX_TOOL_NAME - hash.length - 1)}_${hash}`;
}

function snakeCase(name: string): string {
  const snake = name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/_+/g, '_')
    .replace(/^_|_$/g, '');
  return snake || 'tool';
}

/** Whether an `allow`/`deny` entry names this tool: by its MCP name, its sanitized name or its whole Parlor name. */
export function listNames(list: readonly string[], server: string, tool: string): boolean {
  const parlor = parlorToolName(server, tool);
  return list.some((entry) => entry === tool || entry === parlor || `mcp_${server}_${entry}` === parlor);
}

/**
 * The server's input schema as tool parameters: an object schema the runner's ajv compiles. `$schema` goes (ajv
 * knows one draft, and a server names any); a schema ajv still refuses becomes "any object", and the server checks.
 */
export function toolParameters(inputSchema: Record<string, unknown> | undefined, ajv: Ajv): { parameters: Record<string, unknown>; replaced: boolean } {
  const { $schema: _ignored, ...rest } = inputSchema ?? {};
  const parameters = { ...rest, type: 'object' };
  try {
    ajv.compile(parameters);
    return { parameters, replaced: false };
  } catch {
    return { parameters: { type: 'object', additionalProperties: true }, replaced: true };
  }
}

type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'image' | 'audio'; mimeType: string; data: string }
  | { type: 'resource_link'; uri: string; name?: string; mimeType?: string }
  | { type: 'resource'; resource: { uri: string; mimeType?: string; text?: string; blob?: string } }
  | { type: string };

/**
 * A tools/call result as the text the model reads: text parts joined, other parts described in a line
 * (`[image/png, 12 KB]`), structured content as JSON when there is nothing else; `isError` becomes `error: ...`.
 */
export function formatToolResult(result: { [key: string]: unknown }): string {
  // A server on the 2024-10-07 protocol answers { toolResult } instead.
  if (!('content' in result) && 'toolResult' in result) return JSON.stringify(result.toolResult);
  const parts = Array.isArray(result.content) ? (result.content as ContentPart[]) : [];
  let text = parts.map(describePart).join('\n');
  if (!text.trim() && result.structuredContent !== undefined) text = JSON.stringify(result.structuredContent);
  if (result.isError === true) return `error: ${text.trim() || 'the tool reported an error and said nothing more'}`;
  return text.trim() ? text : '(the tool returned nothing)';
}

function describePart(part: ContentPart): string {
  if ('text' in part && part.type === 'text') return part.text;
  if ((part.type === 'image' || part.type === 'audio') && 'data' in part) return `[${part.mimeType}, ${formatSize(base64Bytes(part.data))}]`;
  if (part.type === 'resource_link' && 'uri' in part) return `[link: ${part.name ? `${part.name} ` : ''}${part.uri}${part.mimeType ? `, ${part.mimeType}` : ''}]`;
  if (part.type === 'resource' && 'resource' in part) {
    const { uri, mimeType, text, blob } = part.resource;
    if (text !== undefined) return `[${uri}]\n${text}`;
    return `[${uri}${mimeType ? `, ${mimeType}` : ''}, ${formatSize(base64Bytes(blob ?? ''))}]`;
  }
  return `[${part.type} content]`;
}

function base64Bytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}
