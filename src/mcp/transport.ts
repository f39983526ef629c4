import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

/** How to reach one server, with its secrets resolved: what a connection is made from. */
export type ServerTarget =
  | { transport: 'stdio'; command: string; args: string[]; env: Record<string, string>; cwd: string }
  | { transport: 'http'; url: string; headers: Record<string, string> };

// Taken from Parlor's own environment, as for shell commands; everything else (DATABASE_URL, API keys, bot tokens)
// stays out, and a server gets only what its entry declares besides.
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM', 'USER', 'LOGNAME', 'SHELL', 'TMPDIR'];
const STDERR_TAIL_CHARS = 2000;

/** The environment a stdio server starts with: the passed-through variables of `base`, then its declared `env`. */
export function serverEnvironment(base: Readonly<Record<string, string | undefined>>, declared: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASSED_THROUGH) {
    const value = base[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...declared };
}

export interface OpenedTransport {
  transport: Transport;
  /** How the server's process ended, once it has (stdio only). */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  pid(): number | undefined;
  /** The last of what the process wrote to stderr: the reason it gives when it fails to start. */
  stderrTail(): string;
}

/** What one HTTP response of a server may be, at most (the SDK's stdio transport stops at 10 MB as well). */
export const MAX_HTTP_RESPONSE_BYTES = 10 * 1024 * 1024;

/**
 * fetch, with the response body cut off past MAX_HTTP_RESPONSE_BYTES: a server is not trusted to keep it small, and
 * the SDK reads a JSON answer whole. The body fails with a clear error instead (the call then says why).
 */
export class ResponseTooLargeError extends Error {
  constructor() {
    super(`its answer was larger than ${MAX_HTTP_RESPONSE_BYTES / 1024 / 1024} MB`);
  }
}

/** Whether the error (or one it wraps) is an answer cut off for its size. */
export function isResponseTooLarge(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) if (e instanceof ResponseTooLargeError) return true;
  return false;
}

async function boundedFetch(input: string | URL, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, init);
  if (!response.body) return response;
  let seen = 0;
  const limit = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > MAX_HTTP_RESPONSE_BYTES) controller.error(new ResponseTooLargeError());
      else controller.enqueue(chunk);
    },
  });
  return new Response(response.body.pipeThrough(limit), { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** A transport for the target; nothing starts until the client connects it. */
export function openTransport(target: ServerTarget, base: Readonly<Record<string, string | undefined>>): OpenedTransport {
  if (target.transport === 'http') {
    const transport = new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers: target.headers }, fetch: boundedFetch });
    return { transport, exit: () => undefined, pid: () => undefined, stderrTail: () => '' };
  }
  if (!isDirectory(target.cwd)) throw new Error(`its folder (cwd) ${target.cwd} does not exist`);
  const transport = new WatchedStdioTransport({
    command: target.command,
    args: target.args,
    env: serverEnvironment(base, target.env),
    cwd: target.cwd,
    stderr: 'pipe',
  });
  let tail = '';
  // Read stderr even when nobody looks at it: a full pipe would block the server.
  transport.stderr?.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
  });
  return { transport, exit: () => transport.exitStatus, pid: () => transport.pid ?? undefined, stderrTail: () => tail };
}

/** The SDK's stdio transport, remembering how the process ended (the SDK reports only that it closed). */
class WatchedStdioTransport extends StdioClientTransport {
  exitStatus?: { code: number | null; signal: NodeJS.Signals | null };

  override async start(): Promise<void> {
    await super.start();
    // The child process is private to the SDK; its exit status is what a person fixing the server needs to see.
    const child = (this as unknown as { _process?: ChildProcess })._process;
    child?.once('exit', (code, signal) => {
      this.exitStatus = { code, signal };
    });
  }
}

function isDirectory(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
