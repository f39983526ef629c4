import { App, SocketModeReceiver, webApi, type RespondFn } from '@slack/bolt';
import type { Logger } from 'pino';
import type { Connector, ConnectorStatus, EventKeeper, InboundEvent, InboundHandler } from '#src/connector.ts';
import { ConfigError } from '#src/config/errors.ts';
import { sleep } from '#src/retry.ts';
import { exclusiveReceiver } from '../shared/exclusive.ts';
import { keepConnecting as reconnect } from '../shared/reconnect.ts';
import { acknowledgeBy } from '../shared/ack.ts';
import { EDIT_LIMITS } from './draft.ts';
import { TEXT_LIMIT } from './format.ts';
import { normalizeClick, normalizeEvent, type SlackBot } from './normalize.ts';
import { EVENTS_PATH, ParlorReceiver } from './receiver.ts';
import { downloadFile } from './files.ts';
import { createSlackSending } from './send.ts';
import { boltLogger, DEFAULT_RETRIES, describe, isTokenError, tokenRefused } from './web-api.ts';

export { EVENTS_PATH } from './receiver.ts';

export interface SlackOptions {
  botToken: string;
  /** App-level token (`xapp-…`): Socket Mode. Without it, HTTP events at EVENTS_PATH checked with `signingSecret`. */
  appToken?: string;
  signingSecret?: string;
  /** The Web API base (`SLACK_API_URL`), which also serves apps.connections.open; Slack's own by default. */
  apiUrl?: string;
  log: Logger;
  /**
   * Socket Mode's watchdog: a ping Slack leaves unanswered this long replaces the connection (it is also the step
   * of the reconnect backoff). Default 5 s.
   */
  pingTimeoutMs?: number;
  /** No ping from Slack for this long also replaces it. Default 30 s. */
  serverPingTimeoutMs?: number;
  /** The Web API client's retries of a failed call (a 429 waits out its Retry-After). */
  retries?: { retries: number; minTimeout: number; maxTimeout: number };
}

/** Slack wants every event and interaction acknowledged within 3 s. */
const ACK_DEADLINE_MS = 3000;
/** How long start-up waits for Socket Mode's first connection before carrying on without it. */
const SOCKET_START_WAIT_MS = 30_000;
/** How long a first message from someone waits for their name (users.info). */
const NAME_WAIT_MS = 1000;

/**
 * Slack on Bolt: Socket Mode with an app-level token, else HTTP events on Parlor's server. Each event is handed to
 * the core and acknowledged once it is stored (by 3 s at the latest); replies go out as mrkdwn converted from
 * Markdown, split under 4,000 characters, in the thread of the message they answer; buttons are Block Kit.
 */
export function createSlackConnector(options: SlackOptions): Connector {
  const log = options.log.child({ connector: 'slack' });
  const logger = boltLogger(log);
  const slackApiUrl = `${(options.apiUrl ?? 'https://slack.com/api').replace(/\/+$/, '')}/`;
  const retries = options.retries ?? DEFAULT_RETRIES;
  const clientOptions: webApi.WebClientOptions = {
    slackApiUrl,
    logger,
    retryConfig: { retries: retries.retries, factor: 2, minTimeout: retries.minTimeout, maxTimeout: retries.maxTimeout },
    timeout: 30_000,
  };
  const client = new webApi.WebClient(options.botToken, clientOptions);
  // Posting is never retried by the client: a post whose answer was lost may be in the chat, and only the outbox's
  // retry, which looks for it first (`resend`), may post again.
  const poster = new webApi.WebClient(options.botToken, { ...clientOptions, retryConfig: { retries: 0 } });
  const socketMode = Boolean(options.appToken);
  let bot: SlackBot | undefined;
  let keeper: EventKeeper | undefined;
  let app: App | undefined;
  let receiver: ParlorReceiver | undefined;
  let handler: InboundHandler | undefined;
  let state: ConnectorStatus = { state: 'starting' };
  let starting: Promise<void> | undefined;
  const stopper = new AbortController();
  const names = new Map<string, Promise<string | undefined>>();
  const sending = createSlackSending({ client, poster, log });

  /**
   * The person's name for the model's label in a group (`[Ana (slack:U…)]`): users.info, asked once per person and
   * remembered. The first message from someone waits for it briefly; past that it goes with their id alone.
   */
  async function withName(event: InboundEvent): Promise<InboundEvent> {
    if (event.sender.name || event.chat.type !== 'group') return event;
    let lookup = names.get(event.sender.id);
    if (!lookup) {
      lookup = client.users
        .info({ user: event.sender.id })
        .then((r) => r.user?.real_name || r.user?.profile?.display_name || r.user?.name || undefined)
        .catch(() => {
          names.delete(event.sender.id);
          return undefined;
        });
      names.set(event.sender.id, lookup);
    }
    const name = await Promise.race([lookup, sleep(NAME_WAIT_MS).then(() => undefined)]);
    return name ? { ...event, sender: { ...event.sender, name } } : event;
  }

  async function receiveEvent(body: any, context: Record<string, any>): Promise<void> {
    const ackEvent = context.ackEvent as (() => Promise<void>) | undefined;
    let event: InboundEvent | undefined;
    try {
      event = normalizeEvent(body.event, String(body.event_id ?? ''), bot!);
    } catch (err) {
      // Nothing the core could store or Slack could usefully send again.
      log.error({ err, event: body.event_id }, 'event could not be read; skipped');
    }
    if (event && handler) {
      if (context.retryNum) log.debug({ event: body.event_id, retry: context.retryNum, reason: context.retryReason }, 'Slack delivered an event again');
      const inbound = await withName(event);
      const outcome = await acknowledgeBy(ACK_DEADLINE_MS, () => handler!(inbound), { log, keep: keeper && (() => keeper!.keep(inbound)) });
      if (outcome.kind === 'late') log.warn({ event: body.event_id }, 'event acknowledged at the deadline; still being stored');
    }
    await ackEvent?.();
  }

  async function receiveClick(args: { ack: () => Promise<void>; body: any; action: any; respond?: RespondFn }): Promise<void> {
    const event = normalizeClick(args.body, args.action);
    let notice: string | undefined;
    try {
      if (event && handler) {
        // Acknowledged by the deadline whatever the core is doing: a click never waits behind a turn.
        const outcome = await acknowledgeBy(ACK_DEADLINE_MS, () => handler!(event), { log, keep: keeper && (() => keeper!.keep(event)) });
        await args.ack().catch((err: unknown) => log.warn({ err }, 'a click could not be acknowledged'));
        notice = outcome.kind === 'stored' ? outcome.result.notice : (await outcome.result)?.notice;
      } else await args.ack();
    } catch (err) {
      log.error({ err }, 'a click could not be handled');
      await args.ack().catch(() => undefined);
      notice = 'That did not go through; please try again.';
    }
    if (notice && event) await tellPrivately(event, notice, args.respond);
  }

  /** What concerns the clicker alone (not theirs, already answered…): an ephemeral message, else through response_url. */
  async function tellPrivately(event: InboundEvent, text: string, respond?: RespondFn) {
    try {
      await client.chat.postEphemeral({ channel: event.chat.id, user: event.sender.id, text, ...(event.chat.thread ? { thread_ts: event.chat.thread } : {}) });
    } catch (err) {
      log.debug({ err: describe(err) }, 'chat.postEphemeral failed; answering through the response URL');
      await respond?.({ response_type: 'ephemeral', replace_original: false, text }).catch((e: unknown) => log.warn({ err: describe(e) }, 'the notice to the clicker was lost'));
    }
  }

  function buildApp(identity: SlackBot): App {
    const socket = socketMode
      ? new SocketModeReceiver({
          appToken: options.appToken!,
          logger,
          clientPingTimeout: options.pingTimeoutMs ?? 5000,
          serverPingTimeout: options.serverPingTimeoutMs ?? 30_000,
          // Its own copy of the client options: socket-mode writes its 100-retry policy for apps.connections.open
          // into the object it is given, which should not become the Web API client's.
          installerOptions: { clientOptions: { slackApiUrl } },
          // A listener that fails before storing the event leaves it unacknowledged: Slack sends it again.
          processEventErrorHandler: async ({ error }) => {
            log.warn({ err: describe(error) }, 'a Slack event could not be stored; Slack will deliver it again');
            return false;
          },
        })
      : undefined;
    if (socket) {
      socket.client.on('connected', () => (state = { state: 'up' }));
      socket.client.on('reconnecting', () => (state = { state: 'down', detail: 'Socket Mode connection lost; reconnecting' }));
    }
    receiver = new ParlorReceiver({ log, socket, signingSecret: options.signingSecret });
    const bolt = new App({
      token: options.botToken,
      botId: identity.botId,
      botUserId: identity.userId,
      receiver,
      clientOptions,
      logger,
      // auth.test ran already; Bolt need not ask again.
      tokenVerificationEnabled: false,
      convoStore: false,
    });
    bolt.event('message', ({ body, context }) => receiveEvent(body, context));
    bolt.event('app_mention', ({ body, context }) => receiveEvent(body, context));
    bolt.event('reaction_added', ({ body, context }) => receiveEvent(body, context));
    bolt.action({ type: 'block_actions' }, ({ ack, body, action, respond }) => receiveClick({ ack: () => ack(), body, action, respond }));
    return bolt;
  }

  /** Who the bot is (auth.test), then the receiving side started: the socket connected, or the endpoint ready. */
  async function connect(): Promise<void> {
    const auth = await client.auth.test();
    bot = { userId: String(auth.user_id), botId: String(auth.bot_id ?? ''), name: String(auth.user ?? 'parlor') };
    app ??= buildApp(bot);
    if (socketMode) {
      const refused = (err: unknown) =>
        isTokenError(err) ? tokenRefused('SLACK_APP_TOKEN', err, 'an app-level token with connections:write (Basic Information → App-Level Tokens)') : err;
      const started = app.start().then(
        () => 'up' as const,
        (err: unknown) => {
          throw refused(err);
        },
      );
      // A socket that opens but never says hello would hold start-up for ever: after a while Parlor runs without
      // it, says so, and the connection comes up (or its failure is logged) in the background.
      const outcome = await Promise.race([started, sleep(SOCKET_START_WAIT_MS, stopper.signal).then(() => 'waiting' as const)]);
      if (outcome === 'waiting') {
        state = { state: 'down', detail: 'Socket Mode is not connected yet' };
        log.warn('Slack Socket Mode has not connected yet; carrying on and waiting for it');
        started.then(
          () => (state = { state: 'up' }),
          (err: unknown) => {
            state = { state: 'down', detail: describe(err) };
            log.error({ err: describe(err) }, 'Slack Socket Mode could not connect');
          },
        );
        return;
      }
    }
    state = { state: 'up' };
    log.info({ bot: bot.name, mode: socketMode ? 'Socket Mode' : `HTTP events at ${EVENTS_PATH}` }, 'receiving Slack events');
  }

  function keepConnecting(first: unknown): Promise<void> {
    return reconnect({
      platform: 'Slack',
      first,
      connect,
      signal: stopper.signal,
      describe,
      fatal: (err) => (err instanceof ConfigError || isTokenError(err) ? { detail: describe(err), message: describe(err) } : undefined),
      setState: (next) => (state = next),
      log,
      where: { apiUrl: slackApiUrl },
    });
  }

  const connector: Connector = {
    id: 'slack',
    capabilities: {
      buttons: true,
      edits: EDIT_LIMITS,
      removeButtons: true,
      react: true,
      threads: true,
      // A mention is answered in a thread on it, and that thread is the persona's from then on.
      ownsReplyThreads: true,
      // A bot has no "typing…" in Slack (only AI assistant threads have a status line).
      typing: false,
      privateReplies: true,
      maxTextLength: TEXT_LIMIT,
      ackDeadlineMs: ACK_DEADLINE_MS,
    },
    // One Socket Mode connection per app token across the deployment; HTTP events may reach several processes.
    ...(socketMode ? { exclusive: exclusiveReceiver('slack-socket', options.appToken!, 'Slack Socket Mode for this app token') } : {}),
    ...(socketMode ? {} : { webhook: { path: EVENTS_PATH, handle: (request: Request) => (receiver ? receiver.handle(request) : Promise.resolve(new Response('not ready', { status: 503 }))) } }),

    async start(onInbound, eventKeeper) {
      handler = onInbound;
      keeper = eventKeeper;
      try {
        await connect();
      } catch (err) {
        if (err instanceof ConfigError) throw err;
        if (isTokenError(err)) throw tokenRefused('SLACK_BOT_TOKEN', err, 'the Bot User OAuth Token (OAuth & Permissions, xoxb-…)');
        state = { state: 'down', detail: describe(err) };
        starting = keepConnecting(err);
      }
    },

    status: () => state,

    async stop() {
      stopper.abort();
      await starting;
      await app?.stop().catch((err: unknown) => log.warn({ err: describe(err) }, 'Slack receiver did not stop cleanly'));
    },

    ...sending,

    download: (attachment, directory) => downloadFile({ client, botToken: options.botToken, apiUrl: slackApiUrl, signal: stopper.signal }, attachment, directory),

  };
  return connector;
}
