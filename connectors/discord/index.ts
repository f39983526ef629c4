import {
  Client,
  Events,
  MessageFlags,
  Partials,
  type Channel,
  type Interaction,
  type Message,
  type MessageReaction,
  type PartialMessage,
  type PartialMessageReaction,
  type PartialUser,
  type User,
} from 'discord.js';
import type { Logger } from 'pino';
import { PlatformError, type Connector, type ConnectorStatus, type EventKeeper, type InboundEvent, type InboundHandler, type InboundHistory } from '#src/connector.ts';
import { ConfigError } from '#src/config/errors.ts';
import { exclusiveReceiver } from '../shared/exclusive.ts';
import { keepConnecting as reconnect } from '../shared/reconnect.ts';
import { downloadAttachment } from './download.ts';
import { EDIT_LIMITS } from './draft.ts';
import { describe, startError } from './errors.ts';
import { TEXT_LIMIT } from './format.ts';
import { intentBits, MESSAGE_CONTENT_REFUSED } from './intents.ts';
import { normalizeClick, normalizeMessage, normalizeReaction, type BotIdentity } from './normalize.ts';
import { createDiscordSending } from './send.ts';
import { createCatchUp } from './catch-up.ts';
import { discordRestAgent } from './rest-agent.ts';
import { storeInOrder } from './store.ts';

export interface DiscordOptions {
  token: string;
  /** The REST base discord.js is given as `rest.api` (Discord's own by default); the gateway URL is read from it. */
  apiUrl?: string;
  /** Ask for the privileged Message Content intent (every message's text in channels, not only mentions). */
  messageContent?: boolean;
  log: Logger;
}

/** Said privately to someone whose click could not be recorded. */
const CLICK_FAILED = 'Sorry, that click could not be recorded; please try again in a moment.';

/**
 * Discord through discord.js: one gateway connection (DMs, guild channels and threads, reactions, button clicks)
 * and REST through discord.js's client, which keeps Discord's rate-limit buckets. Messages of one channel are handed
 * to the core one after another; clicks are answered at once (deferUpdate) and never wait behind them.
 */
export function createDiscordConnector(options: DiscordOptions): Connector {
  const log = options.log.child({ connector: 'discord' });
  const api = options.apiUrl?.replace(/\/v\d+\/?$/, '');
  let client: Client | undefined;
  /** Who the bot is: known from READY on, before discord.js hands over the events that came while it connected. */
  const me = (): BotIdentity | undefined => (client?.user ? { id: client.user.id, username: client.user.username } : undefined);
  let handler: InboundHandler | undefined;
  let state: ConnectorStatus = { state: 'starting' };
  let starting: Promise<void> | undefined;
  const stopper = new AbortController();
  let keeper: EventKeeper | undefined;
  const queue = storeInOrder({ log, signal: stopper.signal, keep: async (event) => keeper?.keep(event) });
  /** Channel ids seen in events: a send to one of them needs no lookup. */
  const channels = new Set<string>();
  let history: InboundHistory | undefined;

  const rest = () => {
    if (!client) throw new PlatformError({ platform: 'discord', method: 'rest', retryable: true, message: 'not connected yet' });
    return client.rest;
  };
  const sending = createDiscordSending({ client: () => client, rest, channels, log });
  // Every client of this connector sends on it (see discordRestAgent).
  const agent = discordRestAgent();

  function createClient(): Client {
    const next = new Client({
      intents: intentBits(options.messageContent ?? false),
      // Channel: DMs arrive on channels discord.js has not cached (without it they are dropped). Message and
      // Reaction: edits and reactions of messages sent before this process started.
      partials: [Partials.Channel, Partials.Message, Partials.Reaction],
      rest: { ...(api ? { api } : {}), agent },
      allowedMentions: { parse: ['users'], repliedUser: true },
    });
    // A new session (not a resume) knows nothing of what was posted before it: read back first (see catch-up.ts).
    next.on(Events.Raw, (packet: { t?: string; d?: { user?: BotIdentity } }) => {
      if (packet.t === 'READY' && packet.d?.user) catchUp({ id: packet.d.user.id, username: packet.d.user.username });
    });
    next.on(Events.MessageCreate, (message) => onMessage(message, 'message'));
    next.on(Events.MessageUpdate, (_old, message) => onMessage(message, 'edit'));
    next.on(Events.MessageReactionAdd, (reaction, user) => onReaction(reaction, user));
    next.on(Events.InteractionCreate, (interaction) => void onInteraction(interaction));
    next.on(Events.ShardDisconnect, (event) => {
      state = { state: 'down', detail: event.code === 4014 ? MESSAGE_CONTENT_REFUSED : `gateway closed (${event.code}) and will not reconnect` };
      log.error({ code: event.code }, state.detail);
    });
    next.on(Events.ShardReconnecting, () => {
      // Stopping closes the connection too.
      if (stopper.signal.aborted) return;
      state = { state: 'down', detail: 'gateway connection lost; reconnecting' };
      log.warn('Discord gateway connection lost; reconnecting');
    });
    next.on(Events.ShardResume, () => {
      state = { state: 'up' };
      log.info('Discord gateway resumed');
    });
    next.on(Events.ShardReady, () => void (state = { state: 'up' }));
    next.on(Events.ShardError, (err) => log.warn({ err }, 'Discord gateway error'));
    next.on(Events.Error, (err) => log.error({ err }, 'discord.js error'));
    return next;
  }

  function onMessage(message: Message | PartialMessage, kind: 'message' | 'edit') {
    const bot = me();
    // The bot's own messages come back over the gateway; they never reach the core.
    if (!bot || message.author?.id === bot.id) return;
    channels.add(message.channelId);
    queue.add(message.channelId, async () => {
      const full = message.partial ? await message.fetch() : message;
      // An update without a new text (an embed unfolding, a pin) is no edit.
      if (kind === 'edit' && full.editedTimestamp === null) return undefined;
      if (full.author.id === bot.id) return undefined;
      await knownChannel(full);
      return normalizeMessage(full, bot, kind);
    }, handle);
  }

  function onReaction(reaction: MessageReaction | PartialMessageReaction, user: User | PartialUser) {
    const bot = me();
    if (!bot || user.id === bot.id) return;
    queue.add(reaction.message.channelId, async () => {
      const full = reaction.partial ? await reaction.fetch() : reaction;
      const person = user.partial ? await user.fetch() : user;
      return normalizeReaction(full, person, await channelOf(full.message.channelId));
    }, handle);
  }

  /** The message's channel, fetched when discord.js knows only its id (a thread it has not seen, say). */
  async function knownChannel(message: Message) {
    if (message.guildId && (!message.channel || message.channel.partial)) await client!.channels.fetch(message.channelId).catch(() => undefined);
  }

  async function channelOf(id: string): Promise<Channel | null> {
    return client!.channels.cache.get(id) ?? (await client!.channels.fetch(id).catch(() => null));
  }

  const handle = (event: InboundEvent) => handler!(event);
  const catchUp = createCatchUp({ client: () => client, history: () => history, queue, handle, seen: (id) => channels.add(id), stopped: () => stopper.signal.aborted, log });

  /**
   * A click is acknowledged first (deferUpdate: Discord waits 3 s at most), then resolved; what the core says about
   * it (not yours, expired, noted) goes to the clicker alone. It never waits behind the chat's messages or turn.
   */
  async function onInteraction(interaction: Interaction) {
    if (!interaction.isButton() && !interaction.isStringSelectMenu()) return;
    const acknowledged = interaction.deferUpdate().then(
      () => true,
      (err: unknown) => (log.warn({ err, interaction: interaction.id }, 'the click could not be acknowledged in time'), false),
    );
    let notice: string | undefined;
    try {
      const channel = interaction.channel ?? (await channelOf(interaction.channelId));
      // The core waits for a database that is restarting; a click that fails here failed for good.
      notice = (await handler!(normalizeClick(interaction, channel))).notice;
    } catch (err) {
      log.error({ err, interaction: interaction.id }, 'a click could not be handled');
      notice = CLICK_FAILED;
    }
    if (!(await acknowledged) || !notice) return;
    await interaction.followUp({ content: notice, flags: MessageFlags.Ephemeral, allowedMentions: { parse: [] } }).catch((err: unknown) => log.warn({ err }, 'the notice of a click could not be shown'));
  }

  async function connect(): Promise<void> {
    const next = createClient();
    client = next;
    const ready = new Promise<void>((resolve, reject) => {
      next.once(Events.ClientReady, () => resolve());
      next.once(Events.ShardDisconnect, (event) => reject(event.code === 4014 ? new ConfigError(MESSAGE_CONTENT_REFUSED) : new Error(`gateway closed (${event.code})`)));
    });
    ready.catch(() => {});
    try {
      await next.login(options.token);
      await ready;
    } catch (err) {
      await next.destroy().catch(() => {});
      if (client === next) client = undefined;
      throw startError(err);
    }
    state = { state: 'up' };
    log.info({ bot: next.user!.tag, messageContent: options.messageContent ?? false }, 'connected to the Discord gateway');
  }

  /** Discord could not be reached at start: every try is logged with its cause and when the next one is. */
  function keepConnecting(first: unknown): Promise<void> {
    return reconnect({
      platform: 'Discord',
      first,
      connect,
      signal: stopper.signal,
      describe,
      fatal: (err) => (err instanceof ConfigError ? { detail: err.message, message: err.message } : undefined),
      setState: (next) => (state = next),
      log,
      where: { apiUrl: api ?? 'https://discord.com/api' },
    });
  }

  const connector: Connector = {
    id: 'discord',
    // Every gateway session of a token receives every event: one process holds the gateway.
    exclusive: exclusiveReceiver('discord-gateway', options.token, 'the Discord gateway for this bot token'),
    capabilities: {
      buttons: true,
      edits: EDIT_LIMITS,
      removeButtons: true,
      react: true,
      threads: true,
      typing: true,
      // Only an interaction's answer can be ephemeral on Discord: a reply to a message is seen by the whole channel.
      privateReplies: false,
      maxTextLength: TEXT_LIMIT,
      ackDeadlineMs: 3000,
    },

    async start(onInbound, eventKeeper, inboundHistory) {
      handler = onInbound;
      keeper = eventKeeper;
      history = inboundHistory;
      try {
        await connect();
      } catch (err) {
        // A refused token or intent stops start-up with what to do; an unreachable Discord does not.
        if (err instanceof ConfigError) throw err;
        state = { state: 'down', detail: describe(err) };
        starting = keepConnecting(err);
      }
    },

    status: () => state,

    async stop() {
      stopper.abort();
      await starting;
      await queue.drain(5000);
      await client?.destroy();
      await agent.close();
    },

    send: sending.send,
    edit: sending.edit,
    react: sending.react,
    typing: sending.typing,

    download: (attachment, directory) => downloadAttachment(rest(), attachment, directory, stopper.signal),

    draft: sending.draft,
  };
  return connector;
}
