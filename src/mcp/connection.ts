import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { scrubSecrets } from '#src/tools/scrub.ts';
import { settleWithin } from '#src/retry.ts';
import { formatToolResult } from './tool-shape.ts';
import { isResponseTooLarge, MAX_HTTP_RESPONSE_BYTES, openTransport, type OpenedTransport, type ServerTarget } from './transport.ts';

export interface ConnectionTimings {
  /** Each step of connecting (starting, initialize, tools/list) gives up after this long. */
  connectTimeoutMs: number;
  pingIntervalMs: number;
  /** The first reconnect waits this long, each next one twice as long, up to `backoffMaxMs`. */
  backoffInitialMs: number;
  backoffMaxMs: number;
}

export interface ListedTool {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
}

export type ConnectionState = 'connecting' | 'connected' | 'down' | 'closed';

const CLIENT_INFO = { name: 'parlor', version: '1.0.0' };
const MAX_TOOL_PAGES = 50;
/** A server's tools, at most, and what each may say of itself: a server is not trusted to keep them small. */
const MAX_TOOLS = 500;
const MAX_DESCRIPTION_CHARS = 2000;
const MAX_SCHEMA_CHARS = 20_000;

/**
 * One MCP server: connects at once, pings while connected, reconnects with exponential backoff after an exit or a
 * failed ping, and keeps the server's tool list. Calls give text for every outcome and never wait past their timeout.
 */
export class McpConnection {
  state: ConnectionState = 'connecting';
  tools: ListedTool[] = [];
  /** Settles when the first attempt to connect has succeeded or failed. */
  readonly firstAttempt: Promise<void>;
  firstAttemptSettled = false;
  private reason?: () => string;
  private retryAt?: number;
  private client?: Client;
  private opened?: OpenedTransport;
  private attempt?: Promise<void>;
  private failures = 0;
  private reconnectTimer?: NodeJS.Timeout;
  private pingTimer?: NodeJS.Timeout;

  constructor(
    readonly name: string,
    private readonly target: ServerTarget,
    private readonly options: {
      timings: ConnectionTimings;
      /** Where stdio servers take PATH, HOME and the locale from. */
      baseEnv: Readonly<Record<string, string | undefined>>;
      log: Logger;
      /** Secret values in the target, masked in every message. */
      secrets: string[];
    },
  ) {
    this.firstAttempt = this.connect().finally(() => {
      this.firstAttemptSettled = true;
    });
  }

  /** Calls a tool: its text result, or a line saying why there is none (`error: ...`, `timeout: ...`). */
  async call(tool: string, args: unknown, options: { signal: AbortSignal; timeoutMs: number }): Promise<string> {
    const { signal, timeoutMs } = options;
    const started = Date.now();
    if (this.state === 'connecting' && this.attempt) await settleWithin(this.attempt, timeoutMs, signal);
    const client = this.client;
    if (signal.aborted) return `cancelled: the turn was stopped before ${tool} ran on MCP server "${this.name}".`;
    if (this.state !== 'connected' || !client) return `error: ${this.unavailable()}`;
    const timeout = Math.max(1, timeoutMs - (Date.now() - started));
    try {
      const result = await client.callTool({ name: tool, arguments: (args ?? {}) as Record<string, unknown> }, undefined, { signal, timeout });
      // The runner masks the persona's secrets; a global server's come from Parlor's environment, so mask them here.
      return this.clean(formatToolResult(result));
    } catch (err) {
      if (signal.aborted) return `cancelled: the turn was stopped while ${tool} was running on MCP server "${this.name}".`;
      if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
        return `timeout: MCP server "${this.name}" did not answer ${tool} within ${formatSeconds(timeoutMs)}; the call was cancelled.`;
      }
      if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
        return `error: MCP server "${this.name}" stopped while ${tool} was running (${this.reasonText()})${this.retryText()}.`;
      }
      if (err instanceof McpError) return `error: ${this.clean(err.message.replace(/^MCP error -?\d+: /, ''))}`;
      // The server answered, too much: this call fails, and the session goes on.
      if (isResponseTooLarge(err)) return `error: MCP server "${this.name}" answered ${tool} with more than ${MAX_HTTP_RESPONSE_BYTES / 1024 / 1024} MB; the answer was dropped.`;
      // No answer from the server at all (an HTTP request failed): a new session may work where this one does not.
      const detail = this.clean(describeError(err));
      if (this.client === client) this.lose(client, () => `a request failed: ${detail}`);
      return `error: MCP server "${this.name}" could not be reached (${detail})${this.retryText()}.`;
    }
  }

  /** What `parlor doctor` shows. */
  snapshot(): { state: ConnectionState; error?: string; retryInMs?: number; pid?: number } {
    return {
      state: this.state,
      error: this.state === 'down' ? this.reasonText() : undefined,
      retryInMs: this.state === 'down' && this.retryAt !== undefined ? Math.max(0, this.retryAt - Date.now()) : undefined,
      pid: this.state === 'connected' ? this.opened?.pid() : undefined,
    };
  }

  /** Waits (at most `ms`) for the attempt to connect that is under way, if any. */
  async settle(ms: number): Promise<void> {
    if (this.state === 'connecting' && this.attempt) await settleWithin(this.attempt, ms);
  }

  async close(): Promise<void> {
    this.state = 'closed';
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.pingTimer);
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => {});
  }

  private connect(): Promise<void> {
    this.state = 'connecting';
    this.retryAt = undefined;
    this.attempt = this.tryConnect();
    return this.attempt;
  }

  private async tryConnect(): Promise<void> {
    const { timings, log } = this.options;
    let opened: OpenedTransport;
    try {
      opened = openTransport(this.target, this.options.baseEnv);
    } catch (err) {
      this.fail(() => describeError(err));
      return;
    }
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    this.client = client;
    this.opened = opened;
    client.onclose = () => {
      // While connecting, the pending request fails and the attempt says why.
      if (this.client === client && this.state === 'connected') this.lose(client, () => describeExit(opened) ?? 'the connection closed');
    };
    client.onerror = (err) => log.debug({ server: this.name, err: this.clean(err.message) }, 'MCP transport error');
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refreshTools(client));
    try {
      await client.connect(opened.transport, { timeout: timings.connectTimeoutMs });
      const tools = await listAllTools(client, timings.connectTimeoutMs);
      if (this.client !== client) return;
      this.tools = tools;
      this.state = 'connected';
      this.reason = undefined;
      this.schedulePing(client);
      log.info({ server: this.name, tools: tools.length }, 'MCP server connected');
    } catch (err) {
      if (this.client !== client) return; // closed meanwhile
      this.client = undefined;
      void client.close().catch(() => {});
      this.fail(() => describeExit(opened) ?? describeConnectError(err, timings.connectTimeoutMs));
    }
  }

  /** The connection was lost (exit, failed ping, failed request): drop it and reconnect later. */
  private lose(client: Client, reason: () => string): void {
    this.client = undefined;
    void client.close().catch(() => {});
    this.fail(reason);
  }

  private fail(reason: () => string): void {
    if (this.state === 'closed') return;
    clearTimeout(this.pingTimer);
    this.reason = reason;
    const delay = Math.min(this.options.timings.backoffMaxMs, this.options.timings.backoffInitialMs * 2 ** this.failures);
    this.failures++;
    this.state = 'down';
    this.retryAt = Date.now() + delay;
    this.reconnectTimer = setTimeout(() => void this.connect(), delay);
    this.reconnectTimer.unref();
    // Later, so that what the process wrote to stderr before it exited is in the line.
    setImmediate(() => this.options.log.warn({ server: this.name, retryInMs: delay, reason: this.reasonText() }, 'MCP server is down'));
  }

  private schedulePing(client: Client): void {
    const { pingIntervalMs } = this.options.timings;
    this.pingTimer = setTimeout(() => {
      if (this.client !== client) return;
      client.ping({ timeout: Math.min(10_000, Math.max(1_000, pingIntervalMs)) }).then(
        () => {
          if (this.client !== client) return;
          this.failures = 0;
          this.schedulePing(client);
        },
        (err: unknown) => {
          if (this.client === client) this.lose(client, () => `it did not answer a ping (${describeConnectError(err, pingIntervalMs)})`);
        },
      );
    }, pingIntervalMs);
    this.pingTimer.unref();
  }

  /** One refresh at a time, and one more after it at most, however many tools/list_changed a server sends. */
  private refreshing?: Promise<void>;
  private refreshAgain = false;

  private refreshTools(client: Client): void {
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = this.listChanged(client).finally(() => {
      this.refreshing = undefined;
      if (this.refreshAgain) {
        this.refreshAgain = false;
        this.refreshTools(client);
      }
    });
  }

  private async listChanged(client: Client): Promise<void> {
    try {
      const tools = await listAllTools(client, this.options.timings.connectTimeoutMs);
      if (this.client !== client) return;
      this.tools = tools;
      this.options.log.info({ server: this.name, tools: tools.length }, 'MCP server changed its tools');
    } catch (err) {
      this.options.log.warn({ server: this.name, err: this.clean(describeError(err)) }, 'MCP server tools/list failed after tools/list_changed');
    }
  }

  private unavailable(): string {
    if (this.state === 'connecting') return `MCP server "${this.name}" is still connecting; try again in a moment`;
    if (this.state === 'closed') return `MCP server "${this.name}" was stopped`;
    return `MCP server "${this.name}" is not connected (${this.reasonText()}${this.retryText('; ')})`;
  }

  private reasonText(): string {
    return this.clean(this.reason?.() ?? 'the connection closed');
  }

  private retryText(prefix = '; '): string {
    if (this.state !== 'down' || this.retryAt === undefined) return '';
    return `${prefix}reconnecting in ${Math.max(1, Math.ceil((this.retryAt - Date.now()) / 1000))} s`;
  }

  private clean(text: string): string {
    return scrubSecrets(text, this.options.secrets);
  }
}

async function listAllTools(client: Client, timeout: number): Promise<ListedTool[]> {
  const tools: ListedTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_TOOL_PAGES; page++) {
    const result = await client.listTools(cursor ? { cursor } : undefined, { timeout });
    for (const t of result.tools) {
      const description = t.description ?? t.title;
      const schema = JSON.stringify(t.inputSchema ?? {});
      tools.push({
        name: t.name,
        description: description && description.length > MAX_DESCRIPTION_CHARS ? `${description.slice(0, MAX_DESCRIPTION_CHARS)}…` : description,
        // A schema past the bound is taken as "any object" (the server checks its arguments).
        inputSchema: schema.length > MAX_SCHEMA_CHARS ? { type: 'object' } : (t.inputSchema as Record<string, unknown>),
      });
    }
    cursor = result.nextCursor;
    if (!cursor || tools.length >= MAX_TOOLS) break;
  }
  return tools.slice(0, MAX_TOOLS);
}

/** `it exited with code 1: <its last line on stderr>`, once the process has ended. */
function describeExit(opened: OpenedTransport): string | undefined {
  const exit = opened.exit();
  if (!exit) return undefined;
  const how = exit.signal ? `it was killed by ${exit.signal}` : `it exited with code ${exit.code}`;
  const last = opened
    .stderrTail()
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .pop();
  return last ? `${how}: ${last.length > 200 ? `${last.slice(0, 200)}…` : last}` : how;
}

function describeConnectError(err: unknown, timeoutMs: number): string {
  if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) return `it did not answer within ${formatSeconds(timeoutMs)}`;
  const code = (err as NodeJS.ErrnoException).code;
  const syscall = (err as NodeJS.ErrnoException).syscall ?? '';
  const path = (err as { path?: string }).path;
  if (syscall.startsWith('spawn') && code === 'ENOENT') return `its command "${path}" was not found`;
  if (syscall.startsWith('spawn') && code === 'EACCES') return `its command "${path}" cannot be run (permission denied)`;
  return describeError(err);
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err instanceof StreamableHTTPError && err.code !== undefined && err.code > 0) {
    const body = err.message.replace(/^Streamable HTTP error: (Error POSTing to endpoint: )?/, '').split('\n')[0].trim();
    return `it answered HTTP ${err.code}${body ? `: ${body.length > 200 ? `${body.slice(0, 200)}…` : body}` : ''}`;
  }
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const first = err.message.replace(/^MCP error -?\d+: /, '').split('\n')[0];
  // fetch's own message is "fetch failed"; the reason is in its cause.
  return cause?.message ? `${first}: ${cause.message}` : first;
}

function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
