import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  Client,
  DiscordAPIError,
  Events,
  MessageFlags,
  Partials,
  Routes,
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
import {
  PlatformError,
  type Connector,
  type ConnectorStatus,
  type InboundEvent,
  type InboundHandler,
  type OutboundMessage,
  type SentMessage,
} from '#src/connector.ts';
import { ConfigError } from '#src/config/errors.ts';
import { sleep } from '#src/retry.ts';
import { exclusiveReceiver } from '../shared/exclusive.ts';
import { keepConnecting as reconnect } from '../shared/reconnect.ts';
import { componentsFor } from './components.ts';
import { downloadAttachment } from './download.ts';
import { createDiscordDraft, EDIT_LIMITS } from './draft.ts';
import { describe, refusesContent, startError, toPlatformError } from './errors.ts';
import { formatForDiscord, plainForDiscord, TEXT_LIMIT } from './format.ts';
import { intentBits, MESSAGE_CONTENT_REFUSED } from './intents.ts';
import { normalizeClick, normalizeMessage, normalizeReaction, type BotIdentity } from './normalize.ts';
import { storeInOrder } from './store.ts';

export interface DiscordOptions {
  token: string;
  /** The REST base discord.js is given as `rest.api` (Discord's own by default); the gateway URL is read from it. */
  apiUrl?: string;
  /** Ask for the privileged Message Content intent (every message's text in channels, not only mentions). */
  messageContent?: boolean;
  log: Logger;
}

/** Model text never pings @everyone, @here or a role; people named by `<@id>` and the replied-to author may be. */
const ALLOWED_MENTIONS = { parse: ['users'], replied_user: true };
/** Files per message Discord takes. */
const FILES_PER_MESSAGE = 10;
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
  const queue = storeInOrder({ log, signal: stopper.signal });
  /** DM channels opened for people named by their user id (a persona's `primary`), by user id. */
  const dmChannels = new Map<string, string>();
  /** Channel ids seen in events: a send to one of them needs no lookup. */
  const channels = new Set<string>();

  const rest = () => {
    if (!client) throw new PlatformError({ platform: 'discord', method: 'rest', retryable: true, message: 'not connected yet' });
    return client.rest;
  };

  function createClient(): Client {
    const next = new Client({
      intents: intentBits(options.messageContent ?? false),
      // Channel: DMs arrive on channels discord.js has not cached (without it they are dropped). Message and
      // Reaction: edits and reactions of messages sent before this process started.
      partials: [Partials.Channel, Partials.Message, Partials.Reaction],
      ...(api ? { rest: { api } } : {}),
      allowedMentions: { parse: ['users'], repliedUser: true },
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
      notice = (await clickWithRetries(normalizeClick(interaction, channel))).notice;
    } catch (err) {
      log.error({ err, interaction: interaction.id }, 'a click could not be handled');
      notice = CLICK_FAILED;
    }
    if (!(await acknowledged) || !notice) return;
    await interaction.followUp({ content: notice, flags: MessageFlags.Ephemeral, allowedMentions: { parse: [] } }).catch((err: unknown) => log.warn({ err }, 'the notice of a click could not be shown'));
  }

  /** A click the core could not take (the database blinked) is tried again for a few seconds, not for minutes. */
  async function clickWithRetries(event: InboundEvent) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await handler!(event);
      } catch (err) {
        if (attempt >= 3) throw err;
        await sleep(500 * attempt, stopper.signal);
      }
    }
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

  /** The channel a message goes to: a thread, a channel, or the DM with a person named by their user id. */
  async function channelFor(chat: string, thread?: string): Promise<string> {
    if (thread) return thread;
    const opened = dmChannels.get(chat);
    if (opened) return opened;
    const cache = client?.channels.cache;
    if (channels.has(chat) || cache?.has(chat)) return chat;
    // Ids of users and channels never collide: a known user is a person to write to in their DM.
    if (!client?.users.cache.has(chat)) {
      try {
        await client!.channels.fetch(chat);
        channels.add(chat);
        return chat;
      } catch (err) {
        if (!(err instanceof DiscordAPIError && (err.code === 10003 || err.status === 404))) throw toPlatformError(err, 'getChannel', false);
      }
    }
    try {
      const dm = (await rest().post(Routes.userChannels(), { body: { recipient_id: chat } })) as { id: string };
      dmChannels.set(chat, dm.id);
      return dm.id;
    } catch (err) {
      throw toPlatformError(err, 'createDM', false);
    }
  }

  /**
   * One message; a part Discord refuses (Invalid Form Body on its content) goes again as plain text. `nonce` names each
   * message it creates: from the outbound key when there is one, so a resend after a crash finds the message Discord
   * created before the answer was lost (within Discord's few minutes) instead of creating it again.
   */
  async function post(
    channelId: string,
    body: Record<string, unknown>,
    files: { name: string; data: Buffer }[],
    ids: string[],
    nonce: () => string,
  ): Promise<void> {
    const attempt = async (content: string | undefined, extra: Record<string, unknown>, withFiles: typeof files) => {
      const payload = {
        ...body,
        ...extra,
        ...(content !== undefined ? { content } : {}),
        allowed_mentions: ALLOWED_MENTIONS,
        // discord.js retries 5xx itself: the nonce keeps a message Discord created before failing from showing twice.
        nonce: nonce(),
        enforce_nonce: true,
        ...(withFiles.length ? { attachments: withFiles.map((f, i) => ({ id: i, filename: f.name })) } : {}),
      };
      const sent = (await rest().post(Routes.channelMessages(channelId), { body: payload, files: withFiles.length ? withFiles : undefined })) as { id: string };
      ids.push(sent.id);
    };
    const content = body.content as string | undefined;
    try {
      await attempt(content, {}, files);
    } catch (err) {
      if (!content || !refusesContent(err)) throw err;
      log.warn({ channel: channelId, err: describe(err) }, 'Discord refused the message; sending it as plain text');
      const pieces = plainForDiscord(content);
      for (const [i, piece] of pieces.entries()) {
        const first = i === 0;
        const last = i === pieces.length - 1;
        await attempt(piece, { message_reference: first ? body.message_reference : undefined, components: last ? body.components : undefined }, first ? files : []);
      }
    }
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

    async start(onInbound) {
      handler = onInbound;
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
    },

    async send(message: OutboundMessage): Promise<SentMessage> {
      const channelId = await channelFor(message.chat, message.thread);
      const parts = message.text.trim() ? formatForDiscord(message.text) : [];
      const files = await Promise.all((message.files ?? []).map(async (file) => ({ name: path.basename(file), data: await fs.readFile(file) })));
      const fileGroups = Array.from({ length: Math.ceil(files.length / FILES_PER_MESSAGE) }, (_, i) => files.slice(i * FILES_PER_MESSAGE, (i + 1) * FILES_PER_MESSAGE));
      const components = message.buttons?.length ? componentsFor(message.buttons) : [];
      const count = Math.max(parts.length, fileGroups.length, components.length ? 1 : 0);
      const ids: string[] = [];
      // Discord takes up to 25 characters: the same ones for the same part of the same message, attempt after attempt.
      let made = 0;
      const nonce = () =>
        message.key ? createHash('sha256').update(`${message.key}:${channelId}:${made++}`).digest('hex').slice(0, 25) : randomBytes(9).toString('hex');
      try {
        for (let i = 0; i < count; i++) {
          const body: Record<string, unknown> = {
            // Buttons need something to sit under.
            content: parts[i] ?? (components.length && i === count - 1 && !fileGroups[i] ? '…' : undefined),
            // Only the first part quotes the message it answers; the buttons go under the last.
            ...(i === 0 && message.replyTo ? { message_reference: { message_id: message.replyTo, fail_if_not_exists: false } } : {}),
            ...(i === count - 1 && components.length ? { components } : {}),
          };
          await post(channelId, body, fileGroups[i] ?? [], ids, nonce);
        }
      } catch (err) {
        throw toPlatformError(err, 'createMessage', ids.length > 0);
      }
      return { ids };
    },

    async edit(chat, messageId, text, thread) {
      const channelId = await channelFor(chat, thread);
      const [first = '…'] = formatForDiscord(text);
      try {
        await rest().patch(Routes.channelMessage(channelId, messageId), { body: { content: first, components: [], allowed_mentions: ALLOWED_MENTIONS } });
      } catch (err) {
        throw toPlatformError(err, 'editMessage', false);
      }
    },

    async react(chat, messageId, emoji, thread) {
      const channelId = await channelFor(chat, thread);
      try {
        await rest().put(Routes.channelMessageOwnReaction(channelId, messageId, reactionEmoji(emoji)));
      } catch (err) {
        if (err instanceof DiscordAPIError && err.code === 10014) {
          throw new PlatformError({ platform: 'discord', method: 'addReaction', status: err.status, retryable: false, message: `${emoji} is not an emoji Discord knows (a server's own emoji is written <:name:id>)` }, { cause: err });
        }
        throw toPlatformError(err, 'addReaction', false);
      }
    },

    async typing(chat, thread) {
      await rest().post(Routes.channelTyping(await channelFor(chat, thread)));
    },

    download: (attachment, directory) => downloadAttachment(rest(), attachment, directory, stopper.signal),

    draft(target) {
      const channel = channelFor(target.chat, target.thread);
      return createDiscordDraft({
        target,
        async post(text, replyTo) {
          const ids: string[] = [];
          const nonce = () => randomBytes(9).toString('hex');
          await post(await channel, { content: text, ...(replyTo ? { message_reference: { message_id: replyTo, fail_if_not_exists: false } } : {}) }, [], ids, nonce);
          return ids[0];
        },
        async edit(messageId, text) {
          await rest().patch(Routes.channelMessage(await channel, messageId), { body: { content: text, allowed_mentions: ALLOWED_MENTIONS } });
        },
        send: (text, replyTo) => connector.send({ chat: target.chat, thread: target.thread, text, replyTo }),
        isGone: (err) => err instanceof DiscordAPIError && (err.code === 10008 || err.code === 10003),
        firstPart(text) {
          const [first = '', ...rest] = formatForDiscord(text);
          return { first, rest: rest.join('\n\n') };
        },
        onError: (err) => log.debug({ err: describe(err) }, 'draft update failed'),
      });
    },
  };
  return connector;
}

/** Unicode as it is; a server's own emoji as `name:id` (written `<:name:id>`, `<a:name:id>` or `name:id`). */
export function reactionEmoji(emoji: string): string {
  const custom = /^<?a?:?([\w~]{2,32}):(\d{17,21})>?$/.exec(emoji.trim());
  return custom ? `${custom[1]}:${custom[2]}` : emoji.trim();
}

