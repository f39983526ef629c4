// Slack on loopback: the Web API (fake-slack-web-api.ts) and Socket Mode's WebSocket on one port, with the
// response_url and file-upload endpoints, faithful enough that a real Bolt App runs against it (see
// fake-slack.test.ts). Records every call and every envelope; failures are scripted per method.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { WebSocketServer, type WebSocket } from 'ws';
import { createTsClock, eventCallback, imChannelFor, interactionForm, readRequestBody, signedRequest, slackId, type SlackIdentity } from './fake-slack-payloads.ts';
import {
  createSlackWorkspace,
  fail,
  type ClickSpec,
  type PostedResponse,
  type Reply,
  type SlackEphemeral,
  type SlackFile,
  type SlackMessage,
  type SlackUserProfile,
} from './fake-slack-web-api.ts';

export { interactionForm, signedRequest, type SignedRequest } from './fake-slack-payloads.ts';
export type { ClickSpec, PostedResponse, SlackEphemeral, SlackFile, SlackMessage, SlackUserProfile } from './fake-slack-web-api.ts';

export interface FakeSlackOptions extends Partial<SlackIdentity> {
  /** Profiles for users.info, by user id; any other `U…` id gets a made-up profile. */
  users?: Record<string, SlackUserProfile>;
  /** The emoji names reactions.add knows (others: `invalid_name`); any well-formed name when not given. */
  emoji?: string[];
  /** Deliver the bot's own posts, edits and deletions back to it as message events, as Slack does (default true). */
  echoBotMessages?: boolean;
  /** How often the server pings each socket, in ms (0: never; default 10 000). Slack pings; the client watches for it. */
  pingIntervalMs?: number;
  /** How long a delivery may take in all, waiting for an open connection and then for the ack (default 5000 ms). */
  ackTimeoutMs?: number;
  /** The bot token's scopes, sent in `x-oauth-scopes` as Slack does on every Web API answer (not sent when absent). */
  scopes?: string[];
  /** Told of each Web API call once it is answered (a benchmark timing replies). */
  onCall?: (call: SlackApiCall) => void;
}

/** HTTP mode: where Slack posts events and interactions (the app's Request URL), signed with the signing secret. */
export interface HttpTarget {
  url: string;
  signingSecret: string;
}

export interface SlackApiCall {
  method: string;
  /** The parsed body: JSON, or the form with its JSON fields (blocks, attachments…) decoded. */
  body: Record<string, any>;
  /** The token used (Authorization header, else the `token` field). */
  token?: string;
  /** When the request arrived (ms since the epoch). */
  at: number;
  status: number;
  /** What the fake answered. */
  response: Record<string, any> | string;
}

/** A scripted answer: `ok:false` with `error` (HTTP 200 unless `status`); 429 carries `Retry-After`. */
export interface SlackFailure {
  error?: string;
  status?: number;
  /** Seconds, sent as `Retry-After` (with status 429 when no status is given). */
  retryAfter?: number;
  times?: number;
  /** The method does its work first (the message is posted), then answers with the failure: the answer is lost. */
  afterDoing?: boolean;
  /** That many calls of the method are answered as usual first. */
  after?: number;
}

export interface SocketEnvelope {
  envelope_id: string;
  type: 'events_api' | 'interactive' | 'slash_commands';
  payload: Record<string, any>;
  accepts_response_payload: boolean;
  retry_attempt?: number;
  retry_reason?: string;
}

/** One envelope sent over Socket Mode and what became of it. */
export interface Delivery {
  envelope: SocketEnvelope;
  /** HTTP mode: the status the app answered (200 is the ack). */
  status?: number;
  /** A connection was open (the fake waits up to the ack timeout for one, as Slack holds events). */
  delivered: boolean;
  acked: boolean;
  /** What the client's ack carried (`payload`; `{}` for a bare ack). */
  ackPayload?: unknown;
  /** From sending the envelope to its ack arriving. */
  latencyMs?: number;
}

export interface DeliveryOptions {
  retryAttempt?: number;
  retryReason?: string;
  /** Reuse an event id (a redelivery); a new one otherwise. */
  eventId?: string;
  timeoutMs?: number;
}

export interface FakeSlack extends SlackIdentity {
  /** What `clientOptions.slackApiUrl` should be: `http://127.0.0.1:PORT/api/`. */
  apiUrl: string;
  calls: SlackApiCall[];
  callsOf(method: string): SlackApiCall[];
  /** The next `times` (default 1) calls of `method` answer with this failure. */
  failNext(method: string, failure: SlackFailure): void;

  sendEvent(event: Record<string, any>, options?: DeliveryOptions): Promise<Delivery>;
  /** The same event again, as Slack retries it: same event id and time, `retry_attempt` one higher. */
  redeliver(delivery: Delivery, options?: { retryReason?: string; timeoutMs?: number }): Promise<Delivery>;
  sendInteraction(payload: Record<string, any>, options?: { timeoutMs?: number }): Promise<Delivery>;
  /** Every envelope sent (the bot's echoed posts included), in order. */
  deliveries: Delivery[];
  /** What clients sent over their sockets (acks), parsed. */
  socketMessages: unknown[];
  /** Closes every socket (abrupt: drops the TCP connection without a close frame). */
  disconnect(options?: { abrupt?: boolean }): void;
  /** Slack's notice that it is about to recycle the connection. */
  sendDisconnectWarning(reason?: 'warning' | 'refresh_requested' | 'link_disabled'): void;
  /** While on, sockets get neither pongs nor pings (a connection that looks open and is dead). */
  setSilent(silent: boolean): void;
  /** While on, new sockets get no `hello`; turning it off greets them. */
  holdHello(hold: boolean): void;
  openConnections(): number;
  totalConnections(): number;
  /**
   * HTTP mode from now on: envelopes are posted to the target as Slack posts them (events as JSON, interactions as a
   * `payload` form, redeliveries with X-Slack-Retry-Num), and a 200 is their ack. `undefined` goes back to sockets.
   */
  deliverOverHttp(target: HttpTarget | undefined): void;
  waitForConnection(total?: number, timeoutMs?: number): Promise<void>;

  /** A person's DM to the bot: a `message` event with `channel_type: 'im'`; with files, a `file_share`. */
  dm(message: { user: string; text: string; thread_ts?: string; files?: { name: string; bytes: Buffer; mimetype?: string }[] }): Promise<Delivery>;
  /** A mention of the bot: `app_mention` and the matching `message`, two envelopes as Slack sends them. */
  mention(message: { user: string; channel: string; text: string; thread_ts?: string; messageFirst?: boolean }): Promise<{ mention: Delivery; message: Delivery }>;
  /** A person's post in a channel that does not mention the bot. */
  channelMessage(message: { user: string; channel: string; text: string; thread_ts?: string }): Promise<Delivery>;
  /** A click on a button of a message the bot posted, by action id or label: a `block_actions` interaction. */
  click(click: ClickSpec): Promise<Delivery>;
  /** The `block_actions` payload a click would carry, without sending it. */
  blockActions(click: ClickSpec): Record<string, any>;
  /** The `event_callback` an event is wrapped in (for HTTP mode, with signedRequest). */
  eventCallback(event: Record<string, any>, eventId?: string): Record<string, any>;

  /** What the bot has in the channel now, oldest first: deletions dropped, edits applied. */
  messages(channel: string): SlackMessage[];
  /** Any message in the channel, a person's or the bot's. */
  message(channel: string, ts: string): SlackMessage | undefined;
  ephemerals(channel: string, user?: string): SlackEphemeral[];
  /** What was posted to response_urls. */
  responses: PostedResponse[];
  files: SlackFile[];
  statuses: { channel: string; thread_ts: string; status: string }[];
  waitFor<T>(check: () => T | undefined | null | false, timeoutMs?: number): Promise<T>;
  /** Forgets calls, messages and deliveries (connections stay). */
  reset(): void;
  close(): Promise<void>;
}

interface Connection {
  ws: WebSocket;
  greeted: boolean;
  pinger?: NodeJS.Timeout;
}

export async function startFakeSlack(options: FakeSlackOptions = {}): Promise<FakeSlack> {
  const id: SlackIdentity = {
    botToken: options.botToken ?? 'xoxb-1-fake-bot-token',
    appToken: options.appToken ?? 'xapp-1-A1-fake-app-token',
    teamId: options.teamId ?? 'T0FAKE',
    teamDomain: options.teamDomain ?? 'parlor-test',
    botUserId: options.botUserId ?? 'U0BOT',
    botId: options.botId ?? 'B0BOT',
    appId: options.appId ?? 'A1',
  };
  const echoBotMessages = options.echoBotMessages ?? true;
  const ackTimeoutMs = options.ackTimeoutMs ?? 5000;
  const pingIntervalMs = options.pingIntervalMs ?? 10_000;
  const calls: SlackApiCall[] = [];
  const failures = new Map<string, SlackFailure[]>();
  const deliveries: Delivery[] = [];
  const socketMessages: unknown[] = [];
  const eventTimes = new Map<string, number>();
  const pendingAcks = new Map<string, (payload: unknown) => void>();
  const connections = new Set<Connection>();
  const tickets = new Set<string>();
  let totalConnections = 0;
  let silent = false;
  let helloHeld = false;
  let roundRobin = 0;
  let port = 0;
  let httpTarget: HttpTarget | undefined;

  const workspace = createSlackWorkspace({
    id,
    users: options.users,
    emoji: options.emoji,
    nextTs: createTsClock(),
    baseUrl: () => `http://127.0.0.1:${port}`,
    // Slack tells the bot of its own posts too (a reply loop, unless the connector ignores them).
    onBotEvent: (event) => {
      if (echoBotMessages && (httpTarget || openConnections() > 0)) void sendEvent(event);
    },
  });

  const openConnectionUrl = (): Reply => {
    const ticket = randomUUID();
    tickets.add(ticket);
    return { ok: true, url: `ws://127.0.0.1:${port}/socket?ticket=${ticket}&app_id=${id.appId}` };
  };

  function send(res: ServerResponse, status: number, body: Reply | string, headers: Record<string, string> = {}) {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json; charset=utf-8', ...headers });
    res.end(text);
  }

  async function handleApi(req: IncomingMessage, res: ServerResponse, method: string) {
    // Arguments may also come in the query string (GET, or a POST that puts them there).
    const query = Object.fromEntries(new URL(req.url ?? '/', 'http://127.0.0.1').searchParams);
    const body = { ...query, ...(await readRequestBody(req)).body };
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? body.token;
    const call: SlackApiCall = { method, body, token, at: Date.now(), status: 200, response: {} };
    calls.push(call);
    const queue = failures.get(method);
    const first = queue?.[0];
    const scripted = first?.after ? (first.after--, undefined) : first;
    if (scripted) {
      if (!scripted.times || --scripted.times <= 0) queue!.shift();
      call.status = scripted.status ?? (scripted.retryAfter !== undefined ? 429 : 200);
      const headers: Record<string, string> = scripted.retryAfter !== undefined ? { 'retry-after': String(scripted.retryAfter) } : {};
      if (scripted.afterDoing) workspace.methods[method]?.(body);
      call.response = call.status >= 500 ? `${call.status} upstream error` : fail(scripted.error ?? (call.status === 429 ? 'ratelimited' : 'internal_error'));
      return send(res, call.status, call.response, headers);
    }
    const handler = method === 'apps.connections.open' ? openConnectionUrl : workspace.methods[method];
    call.response = !handler ? fail('unknown_method') : (workspace.authorize(method, token) ?? handler(body));
    send(res, 200, call.response, options.scopes && token === id.botToken ? { 'x-oauth-scopes': options.scopes.join(',') } : {});
    options.onCall?.(call);
  }

  const server = createServer((req, res) => {
    const [path] = (req.url ?? '').split('?');
    const route = async () => {
      if (path.startsWith('/api/')) return handleApi(req, res, path.slice('/api/'.length));
      const { body, raw } = await readRequestBody(req);
      if (path.startsWith('/files-pri/')) {
        const bytes = workspace.download(path, /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]);
        if (!bytes) return send(res, 302, 'Found', { location: 'https://slack.com/signin' });
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) });
        return void res.end(bytes);
      }
      if (path.startsWith('/upload/v1/')) {
        const length = workspace.upload(path.slice('/upload/v1/'.length), body, raw);
        return length === undefined ? send(res, 404, 'Not Found') : send(res, 200, `OK - ${length}`);
      }
      if (path.startsWith('/actions/')) {
        if (!workspace.respond(path.slice('/actions/'.length), `http://127.0.0.1:${port}${req.url}`, body)) return send(res, 404, { ok: false, error: 'expired_url' });
        return send(res, 200, { ok: true });
      }
      send(res, 404, 'Not Found');
    };
    route().catch((error) => send(res, 500, String(error)));
  });

  // ---- Socket Mode ----

  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  const openConnections = () => [...connections].filter((c) => c.greeted && c.ws.readyState === c.ws.OPEN).length;

  function greet(connection: Connection) {
    connection.greeted = true;
    const hello = {
      type: 'hello',
      num_connections: openConnections(),
      debug_info: { host: 'applink-fake-1', build_number: 1, approximate_connection_time: 18060 },
      connection_info: { app_id: id.appId },
    };
    connection.ws.send(JSON.stringify(hello));
  }

  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // Each apps.connections.open ticket opens one socket.
    if (url.pathname !== '/socket' || !tickets.delete(url.searchParams.get('ticket') ?? '')) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const connection: Connection = { ws, greeted: false };
      connections.add(connection);
      totalConnections++;
      ws.on('ping', (data) => {
        if (!silent) ws.pong(data);
      });
      ws.on('message', (data) => {
        let message: any;
        try {
          message = JSON.parse(String(data));
        } catch {
          return;
        }
        socketMessages.push(message);
        if (typeof message?.envelope_id === 'string') pendingAcks.get(message.envelope_id)?.(message.payload ?? {});
      });
      ws.on('close', () => {
        clearInterval(connection.pinger);
        connections.delete(connection);
      });
      if (pingIntervalMs > 0) {
        connection.pinger = setInterval(() => {
          if (!silent && ws.readyState === ws.OPEN) ws.ping(Buffer.from(String(Date.now())));
        }, pingIntervalMs);
        connection.pinger.unref();
      }
      if (!helloHeld) greet(connection);
    });
  });

  function pickConnection(): Connection | undefined {
    const open = [...connections].filter((c) => c.greeted && c.ws.readyState === c.ws.OPEN);
    return open.length ? open[roundRobin++ % open.length] : undefined;
  }

  /** Slack's HTTP delivery: a signed POST, answered within the timeout (Slack waits 3 s, then retries). */
  async function postEnvelope(target: HttpTarget, delivery: Delivery, timeoutMs: number): Promise<Delivery> {
    const { envelope } = delivery;
    const raw = envelope.type === 'events_api' ? JSON.stringify(envelope.payload) : interactionForm(envelope.payload);
    const retry = envelope.retry_attempt ? { retryNum: envelope.retry_attempt, retryReason: envelope.retry_reason || 'http_timeout' } : {};
    const request = signedRequest(raw, target.signingSecret, retry);
    const sentAt = performance.now();
    delivery.delivered = true;
    try {
      const response = await fetch(target.url, { method: 'POST', headers: request.headers, body: request.body, signal: AbortSignal.timeout(timeoutMs) });
      const text = await response.text();
      delivery.status = response.status;
      if (response.status === 200) {
        let payload: unknown = {};
        try {
          payload = text ? JSON.parse(text) : {};
        } catch {
          payload = text;
        }
        Object.assign(delivery, { acked: true, ackPayload: payload, latencyMs: performance.now() - sentAt });
      }
    } catch {
      // No answer in time: not acknowledged (Slack would retry).
    }
    return delivery;
  }

  async function deliver(envelope: SocketEnvelope, timeoutMs = ackTimeoutMs): Promise<Delivery> {
    const delivery: Delivery = { envelope, delivered: false, acked: false };
    deliveries.push(delivery);
    if (httpTarget) return postEnvelope(httpTarget, delivery, timeoutMs);
    const deadline = Date.now() + timeoutMs;
    let connection = pickConnection();
    // Slack holds events while no socket is open and sends them once one is.
    while (!connection && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      connection = pickConnection();
    }
    if (!connection) return delivery;
    const sentAt = performance.now();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        pendingAcks.delete(envelope.envelope_id);
        resolve();
      }, Math.max(0, deadline - Date.now()));
      pendingAcks.set(envelope.envelope_id, (payload) => {
        clearTimeout(timer);
        pendingAcks.delete(envelope.envelope_id);
        Object.assign(delivery, { acked: true, ackPayload: payload, latencyMs: performance.now() - sentAt });
        resolve();
      });
      connection.ws.send(JSON.stringify(envelope));
      delivery.delivered = true;
    });
    return delivery;
  }

  function sendEvent(event: Record<string, any>, opts: DeliveryOptions = {}): Promise<Delivery> {
    const eventId = opts.eventId ?? slackId('Ev');
    const eventTime = eventTimes.get(eventId) ?? Math.floor(Date.now() / 1000);
    eventTimes.set(eventId, eventTime);
    const envelope: SocketEnvelope = {
      envelope_id: randomUUID(),
      payload: eventCallback(id, event, eventId, eventTime),
      type: 'events_api',
      accepts_response_payload: false,
      retry_attempt: opts.retryAttempt ?? 0,
      retry_reason: opts.retryReason ?? '',
    };
    return deliver(envelope, opts.timeoutMs);
  }

  function sendInteraction(payload: Record<string, any>, opts: { timeoutMs?: number } = {}) {
    const envelope: SocketEnvelope = { envelope_id: randomUUID(), payload, type: 'interactive', accepts_response_payload: payload.type === 'view_submission' };
    return deliver(envelope, opts.timeoutMs);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;

  return {
    ...id,
    apiUrl: `http://127.0.0.1:${port}/api/`,
    calls,
    callsOf: (method) => calls.filter((c) => c.method === method),
    failNext(method, failure) {
      failures.set(method, [...(failures.get(method) ?? []), { ...failure, times: failure.times ?? 1 }]);
    },
    sendEvent,
    redeliver(delivery, opts = {}) {
      const { event, event_id } = delivery.envelope.payload;
      return sendEvent(event, { eventId: event_id, retryAttempt: (delivery.envelope.retry_attempt ?? 0) + 1, retryReason: opts.retryReason ?? 'timeout', timeoutMs: opts.timeoutMs });
    },
    sendInteraction,
    deliveries,
    socketMessages,
    disconnect({ abrupt = false } = {}) {
      for (const c of connections) {
        if (abrupt) c.ws.terminate();
        else c.ws.close(1000);
      }
    },
    sendDisconnectWarning(reason = 'warning') {
      for (const c of connections) c.ws.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'applink-fake-1' } }));
    },
    setSilent: (on) => void (silent = on),
    holdHello(hold) {
      helloHeld = hold;
      if (!hold) for (const c of connections) if (!c.greeted) greet(c);
    },
    openConnections,
    totalConnections: () => totalConnections,
    deliverOverHttp: (target) => void (httpTarget = target),
    async waitForConnection(total = 1, timeoutMs = 10_000) {
      await waitFor(() => totalConnections >= total && openConnections() > 0, timeoutMs);
    },
    dm({ user, text, thread_ts, files }) {
      return sendEvent(workspace.userPost({ user, channel: imChannelFor([user]), text, thread_ts, files }).message);
    },
    async mention({ user, channel, text, thread_ts, messageFirst = false }) {
      const withMention = text.includes(`<@${id.botUserId}>`) ? text : `<@${id.botUserId}> ${text}`;
      const events = workspace.userPost({ user, channel, text: withMention, thread_ts });
      // Two envelopes at once, each with its own event id; their order is not promised.
      const [first, second] = messageFirst ? [events.message, events.app_mention] : [events.app_mention, events.message];
      const sent = await Promise.all([sendEvent(first), sendEvent(second)]);
      return messageFirst ? { message: sent[0], mention: sent[1] } : { mention: sent[0], message: sent[1] };
    },
    channelMessage(message) {
      return sendEvent(workspace.userPost(message).message);
    },
    click: (click) => sendInteraction(workspace.blockActions(click)),
    blockActions: workspace.blockActions,
    eventCallback: (event, eventId) => eventCallback(id, event, eventId),
    messages: workspace.messages,
    message: workspace.findMessage,
    ephemerals: (channel, user) => workspace.ephemerals.filter((e) => e.channel === channel && (user === undefined || e.user === user)),
    responses: workspace.responses,
    get files() {
      return workspace.files();
    },
    statuses: workspace.statuses,
    waitFor,
    reset() {
      for (const list of [calls, deliveries, socketMessages]) list.length = 0;
      workspace.reset();
      failures.clear();
    },
    async close() {
      // A close handshake first: Bolt's app.stop() returns before its own close frame is answered.
      for (const c of connections) if (c.ws.readyState === c.ws.OPEN) c.ws.close(1001);
      await waitFor(() => connections.size === 0, 1000).catch(() => undefined);
      for (const c of connections) c.ws.terminate();
      wss.close();
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    },
  };
}

/** Polls `check` until it returns something truthy, and returns that. */
async function waitFor<T>(check: () => T | undefined | null | false, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`fake-slack: timed out after ${timeoutMs} ms waiting for ${check.toString().slice(0, 120)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
