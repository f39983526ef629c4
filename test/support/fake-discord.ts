// A stand-in for Discord on loopback, faithful enough for the real discord.js 14 Client: the REST API under
// /api/v10 (point the client at it with `new Client({ rest: { api: fake.apiRoot } })`; discord.js then builds
// `${api}/v10${route}` and reads the gateway's URL from GET /gateway/bot) and the gateway on the same port. People
// write, click and react through the helpers below; every REST call and gateway frame is recorded.
//
// What discord.js does with these events, as tests have to expect it:
// - A DM MESSAGE_CREATE carries `channel_type: 1` and no `guild_id`. discord.js drops it unless the client has
//   `Partials.Channel` (the DM channel is not cached until then): the raw packet arrives, no messageCreate follows.
// - `message.mentions.has(client.user)` is true for @everyone and for a mention of the bot's managed role; only
//   `mentions.users` (or `has(user, { ignoreEveryone: true, ignoreRoles: true })`) means the bot was named.
// - The bot's own messages come back over the gateway as MESSAGE_CREATE and reach `messageCreate`, as on Discord.
// - Without the MESSAGE_CONTENT intent a guild message arrives with empty content unless it mentions the bot.
// - An event while no gateway session exists is lost, as on Discord; one while a session is disconnected is kept
//   and replayed when the client resumes.
// - Interaction callbacks answer 204 with no content type; after `interactionWindowMs` (Discord's 3 s) they answer
//   404 "Unknown interaction" (10062), which discord.js throws as a DiscordAPIError.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGateway, type GatewayConnection, type GatewayFrame, type GatewaySession } from './fake-discord-gateway.ts';
import { mentionsIn } from './fake-discord-checks.ts';
import { createMessageStore } from './fake-discord-messages.ts';
import { createRest, routeMatches, type DiscordCall, type ScriptedFailure } from './fake-discord-rest.ts';
import { createRoutes, type InteractionCallback, type InteractionRecord } from './fake-discord-routes.ts';
import {
  apiUser,
  ChannelKind,
  DEFAULT_GUILD,
  DEFAULT_USERS,
  Intent,
  snowflake,
  World,
  type ApiRole,
  type ApiUser,
  type GuildConfig,
  type StoredAttachment,
  type StoredChannel,
  type StoredMessage,
  type UserConfig,
} from './fake-discord-state.ts';

export type { DiscordCall, GatewayConnection, GatewayFrame, GatewaySession, GuildConfig, InteractionCallback, InteractionRecord, ScriptedFailure, UserConfig };
export { Intent };

export interface FakeDiscordOptions {
  /** The bot token the fake accepts (`Authorization: Bot <token>` and IDENTIFY); default `fake-discord-token`. */
  token?: string;
  bot?: Partial<UserConfig>;
  /** Default: the *_LIMITED gateway flags of the privileged intents not refused. */
  applicationFlags?: number;
  /** Default: alice and bob. */
  users?: UserConfig[];
  /** Default: one guild with `general`, `support` (a thread parent with the thread `open-question`) and a role. */
  guilds?: GuildConfig[];
  /** Privileged intent bits (Intent.MessageContent, …) the application may not use: IDENTIFY with one closes 4014. */
  refuseIntents?: number;
  heartbeatIntervalMs?: number;
  /** How long Discord waits for an interaction's first answer (3 s). */
  interactionWindowMs?: number;
  /** How long an interaction's token works for follow-ups (15 min). */
  interactionTtlMs?: number;
  /** Each route's bucket (per channel, guild or webhook); Discord's message bucket is about 5 per 5 s. */
  rateLimit?: { limit: number; windowMs: number };
  /** How long after READY a session's guilds come (GUILD_CREATE), as when Discord is slow to load them; at once by default. */
  guildsAfterMs?: number;
}

export interface Upload {
  name: string;
  bytes: string | Buffer;
  contentType?: string;
}

export interface PersonMessage {
  /** A configured user's id or username. */
  from: string;
  content: string;
  attachments?: Upload[];
  /** The id of the message this one replies to. */
  message_reference?: string;
  /** Whether a reply pings the replied-to author (Discord's client does by default). */
  pingRepliedUser?: boolean;
  /** When it was posted (ms), for a message from before the test's moment: now by default. */
  postedAt?: number;
}

export interface GuildMessage extends PersonMessage {
  /** A channel's id or name. */
  channel: string;
  /** A thread (id or name) under `channel`; an unknown name is started first, with a THREAD_CREATE. */
  thread?: string;
  /** Users pinged, added to the `<@id>` mentions found in the content (ids or usernames). */
  mentions?: string[];
  /** Default: whether the content says @everyone or @here. */
  mention_everyone?: boolean;
  /** Roles pinged (ids or names), added to the `<@&id>` mentions in the content. */
  mention_roles?: string[];
}

export interface Click {
  /** The clicked message (its id, or the object `messages()` returned). */
  message: string | { id: string };
  customId: string;
  from: string;
  /** Select menus: the chosen values. */
  values?: string[];
  /** Click even when no enabled component has this custom_id (a person cannot; a stale client can). */
  unchecked?: boolean;
  /** When the returned promise gives up (default: the interaction window, 3 s). */
  timeoutMs?: number;
}

export type ApiMessage = Record<string, any> & { id: string; channel_id: string; content: string; author: ApiUser; components: any[]; flags: number };

export interface FakeDiscord {
  /** Give discord.js `rest: { api: apiRoot }`. */
  apiRoot: string;
  gatewayUrl: string;
  token: string;
  bot: ApiUser;
  application: { id: string; flags: number };
  calls: DiscordCall[];
  /** Calls matching `METHOD /path`, where `:name` segments match anything (`POST /channels/:id/messages`). */
  callsOf(route: string): DiscordCall[];
  /** The next `times` requests matching `route` get this answer instead. */
  failNext(route: string, failure: ScriptedFailure, times?: number): void;
  user(ref: string): ApiUser;
  /** A channel or thread by id or name, as the API writes it. */
  channel(ref: string): Record<string, any> & { id: string; type: number };
  /** A guild (the first one by default), with its roles and the bot's managed role. */
  guild(ref?: string): { id: string; name: string; roles: ApiRole[]; botRoleId: string };
  /** The id of the DM channel with a person (opened on first use). */
  dmChannel(user: string): string;
  frames: GatewayFrame[];
  connections: GatewayConnection[];
  sessions(): GatewaySession[];
  /** Sends any dispatch to every session with the next sequence number; returns how many sessions it went to. */
  dispatch(t: string, d: unknown): number;
  /** Drops the gateway connections without a close frame (discord.js resumes). */
  disconnect(): void;
  closeWith(code: number, reason?: string): void;
  requestReconnect(): void;
  invalidateSession(resumable: boolean): void;
  /** Drops every connection and lets every session go: what Discord held for them is gone, and a resume is refused. */
  dropSessions(): void;
  sendDm(message: PersonMessage): ApiMessage;
  sendGuildMessage(message: GuildMessage): ApiMessage;
  /** Dispatches a button (or select) click; resolves with the bot's callback, rejects if none comes in time. Throws
   * at once when the message has no enabled component with that custom_id (unless `unchecked`). */
  click(click: Click): Promise<InteractionCallback>;
  react(reaction: { message: string | { id: string }; from: string; emoji: string; remove?: boolean }): void;
  /** A thread (id or name) archived, as Discord does after its inactivity period: THREAD_UPDATE to the sessions. */
  archiveThread(thread: string): void;
  /** A person edits their message: MESSAGE_UPDATE with the new content and an edited_timestamp. */
  editAsPerson(message: string | { id: string }, content: string): ApiMessage;
  /** What the bot posted in a channel (id or name), oldest first, edits applied, deleted ones left out. */
  messages(channel: string): ApiMessage[];
  /** Any message by id as the API writes it (undefined once deleted). */
  message(id: string): ApiMessage | undefined;
  interactions: InteractionRecord[];
  /** Polls until `check` returns something truthy. */
  waitFor<T>(check: () => T, timeoutMs?: number): Promise<NonNullable<T>>;
  close(): Promise<void>;
}

const APPLICATION_LIMITED_FLAGS = [
  [Intent.GuildPresences, 1 << 13],
  [Intent.GuildMembers, 1 << 15],
  [Intent.MessageContent, 1 << 19],
] as const;

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const token = options.token ?? 'fake-discord-token';
  const bot = apiUser({ username: 'parlor', global_name: 'Parlor', ...options.bot, bot: true });
  const refuseIntents = options.refuseIntents ?? 0;
  const application = {
    id: bot.id,
    flags: options.applicationFlags ?? APPLICATION_LIMITED_FLAGS.reduce((flags, [intent, flag]) => (refuseIntents & intent ? flags : flags | flag), 0),
  };
  const world = new World(bot, options.users ?? DEFAULT_USERS, options.guilds ?? [DEFAULT_GUILD]);
  const interactionWindowMs = options.interactionWindowMs ?? 3000;
  const interactions = new Map<string, InteractionRecord>();
  const waiting = new Map<string, { resolve: (c: InteractionCallback) => void; timer: NodeJS.Timeout }>();
  let port = 0;
  const urls = () => ({ gateway: `ws://127.0.0.1:${port}`, resume: `ws://127.0.0.1:${port}/resume` });
  const attachmentUrl = (a: StoredAttachment, m: StoredMessage) =>
    `http://127.0.0.1:${port}/attachments/${m.channel_id}/${a.id}/${encodeURIComponent(a.filename)}?ex=${(Math.floor(m.created_at / 1000) + 86_400).toString(16)}&is=${Math.floor(m.created_at / 1000).toString(16)}&hm=fake`;

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname.startsWith('/api/v10/')) {
      rest.handle(req, res, url.pathname.slice('/api/v10'.length), url.searchParams).catch((error) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: `fake Discord: ${error}`, code: 0 }));
      });
      return;
    }
    const file = /^\/attachments\/(\d+)\/(\d+)\//.exec(url.pathname);
    const attachment = file && [...world.messages.values()].filter((m) => m.channel_id === file[1]).flatMap((m) => m.attachments).find((a) => a.id === file[2]);
    if (attachment) {
      res.writeHead(200, { 'content-type': attachment.content_type ?? 'application/octet-stream', 'content-length': attachment.size });
      return res.end(attachment.bytes);
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ message: '404: Not Found', code: 0 }));
  });
  const gateway = startGateway({ server, world, token, application, urls, heartbeatIntervalMs: options.heartbeatIntervalMs ?? 41_250, refuseIntents, guildsAfterMs: options.guildsAfterMs });
  const store = createMessageStore(world, gateway, attachmentUrl);
  const routes = createRoutes({
    world,
    store,
    application,
    urls,
    interactions,
    interactionWindowMs,
    interactionTtlMs: options.interactionTtlMs ?? 15 * 60_000,
    sessionStartRemaining: () => 1000 - gateway.frames.filter((f) => f.direction === 'in' && f.op === 2).length,
    onCallback(interaction) {
      const waiter = waiting.get(interaction.id);
      if (!waiter) return;
      clearTimeout(waiter.timer);
      waiting.delete(interaction.id);
      waiter.resolve(interaction.callback!);
    },
  });
  const rest = createRest({ routes, token, rateLimit: options.rateLimit ?? { limit: 50, windowMs: 1000 } });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;

  const storedMessage = (ref: string | { id: string }) => {
    const id = typeof ref === 'string' ? ref : ref.id;
    const message = world.messages.get(id);
    if (!message || message.deleted) throw new Error(`fake Discord: no message ${id}`);
    return message;
  };
  const uploads = (attachments: Upload[] = []) =>
    attachments.map((a) => {
      const bytes = Buffer.from(a.bytes);
      return { filename: a.name, size: bytes.length, ...(a.contentType && { content_type: a.contentType }), bytes };
    });

  function postAsPerson(channel: StoredChannel, m: PersonMessage, pinged: { users: string[]; roles: string[]; everyone: boolean }): ApiMessage {
    const author = world.user(m.from);
    const reference = m.message_reference ? storedMessage(m.message_reference) : undefined;
    const users = new Set(pinged.users);
    if (reference && m.pingRepliedUser !== false) users.add(reference.author_id);
    const message = store.create({
      channel,
      authorId: author.id,
      at: m.postedAt,
      content: m.content,
      attachments: uploads(m.attachments),
      mentions: [...users].filter((id) => world.users.has(id)),
      mention_roles: pinged.roles,
      mention_everyone: pinged.everyone,
      reference,
    });
    return store.render(message) as ApiMessage;
  }

  const roleId = (guildId: string, ref: string) => {
    const roles = world.guilds.get(guildId)!.roles;
    const found = roles.find((r) => r.id === ref || r.name === ref);
    if (!found) throw new Error(`fake Discord: no role ${ref}`);
    return found.id;
  };

  const findComponent = (components: any[], customId: string): any =>
    components.reduce<any>((found, c) => found ?? (c?.custom_id === customId ? c : findComponent([...(c?.components ?? []), ...(c?.accessory ? [c.accessory] : [])], customId)), undefined);

  return {
    apiRoot: `http://127.0.0.1:${port}/api`,
    gatewayUrl: urls().gateway,
    token,
    bot,
    application,
    calls: rest.calls,
    callsOf: (route) => rest.calls.filter((c) => routeMatches(route, c.method, c.path)),
    failNext: rest.failNext,
    user: (ref) => world.user(ref),
    channel: (ref) => world.channelObject(world.channel(ref)) as ReturnType<FakeDiscord['channel']>,
    guild(ref) {
      const guild = ref ? world.guilds.get(ref) ?? [...world.guilds.values()].find((g) => g.name === ref) : world.guilds.values().next().value;
      if (!guild) throw new Error(`fake Discord: no guild ${ref}`);
      return { id: guild.id, name: guild.name, roles: guild.roles, botRoleId: guild.bot_role_id };
    },
    dmChannel: (user) => world.dmChannel(world.user(user).id).id,
    frames: gateway.frames,
    connections: gateway.connections,
    sessions: gateway.sessions,
    dispatch: (t, d) => gateway.dispatch(t, d),
    disconnect: gateway.disconnect,
    closeWith: gateway.closeWith,
    requestReconnect: gateway.requestReconnect,
    invalidateSession: gateway.invalidateSession,
    dropSessions: gateway.dropSessions,

    sendDm(m) {
      const channel = world.dmChannel(world.user(m.from).id);
      return postAsPerson(channel, m, mentionsIn(m.content));
    },

    archiveThread(ref) {
      const thread = world.channel(ref);
      if (!world.isThread(thread)) throw new Error(`fake Discord: ${ref} is not a thread`);
      store.setArchived(thread, true);
    },

    sendGuildMessage(m) {
      let channel = world.channel(m.channel);
      if (!channel.guild_id) throw new Error(`fake Discord: ${m.channel} is not a guild channel`);
      if (m.thread) {
        const parent = channel;
        const known = [...world.channels.values()].find((c) => world.isThread(c) && c.parent_id === parent.id && (c.id === m.thread || c.name === m.thread));
        channel = known ?? world.addThread({ guild_id: parent.guild_id!, parent_id: parent.id, name: m.thread, owner_id: world.user(m.from).id, at: m.postedAt });
        if (!known) store.announceThread(channel);
      }
      const found = mentionsIn(m.content);
      return postAsPerson(channel, m, {
        users: [...found.users, ...(m.mentions ?? []).map((ref) => world.user(ref).id)],
        roles: [...new Set([...found.roles, ...(m.mention_roles ?? []).map((ref) => roleId(channel.guild_id!, ref))])],
        everyone: m.mention_everyone ?? found.everyone,
      });
    },

    click({ message: ref, customId, from, values, unchecked, timeoutMs = interactionWindowMs }) {
      const message = storedMessage(ref);
      const component = findComponent(message.components, customId);
      if (!unchecked && (!component || component.disabled)) throw new Error(`fake Discord: message ${message.id} has no enabled component ${customId}`);
      const user = world.user(from);
      const channel = world.channels.get(message.channel_id)!;
      const guild = message.guild_id ? world.guilds.get(message.guild_id) : undefined;
      const interaction: InteractionRecord = {
        id: snowflake(),
        token: `aW50ZXJhY3Rpb246${Buffer.from(`${Date.now()}:${Math.random()}`).toString('base64url')}`,
        customId,
        channelId: channel.id,
        ...(guild && { guildId: guild.id }),
        messageId: message.id,
        userId: user.id,
        dispatchedAt: 0,
        followups: [],
      };
      interactions.set(interaction.id, interaction);
      const componentType = component?.type ?? 2;
      const payload = {
        id: interaction.id,
        application_id: application.id,
        type: 3,
        token: interaction.token,
        version: 1,
        data: { custom_id: customId, component_type: componentType, ...(componentType !== 2 && { values: values ?? [] }) },
        channel: world.channelObject(channel),
        channel_id: channel.id,
        ...(guild ? { guild_id: guild.id, guild: { id: guild.id, locale: 'en-US', features: [] }, guild_locale: 'en-US', member: { ...world.member(guild, user.id), permissions: guild.roles[0].permissions } } : { user }),
        message: store.render(message),
        app_permissions: guild ? guild.roles[0].permissions : '0',
        locale: 'en-US',
        entitlements: [],
        authorizing_integration_owners: guild ? { '0': guild.id } : { '1': user.id },
        context: guild ? 0 : channel.type === ChannelKind.DM ? 1 : 2,
        attachment_size_limit: 10 * 1024 * 1024,
      };
      const answered = new Promise<InteractionCallback>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(interaction.id);
          reject(new Error(`fake Discord: interaction ${customId} was not answered within ${timeoutMs} ms (Discord shows "This interaction failed")`));
        }, timeoutMs);
        waiting.set(interaction.id, { resolve, timer });
      });
      interaction.dispatchedAt = Date.now();
      gateway.dispatch('INTERACTION_CREATE', payload);
      return answered;
    },

    react({ message, from, emoji, remove }) {
      store.react(storedMessage(message), world.user(from).id, emoji, !remove);
    },

    editAsPerson(ref, content) {
      const message = storedMessage(ref);
      if (message.author_id === bot.id) throw new Error('fake Discord: editAsPerson edits a person\'s message, not the bot\'s');
      return store.render(store.edit(message, { content })) as ApiMessage;
    },

    messages(ref) {
      const channel = world.channel(ref);
      return [...world.messages.values()]
        .filter((m) => m.channel_id === channel.id && m.author_id === bot.id && !m.deleted)
        .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
        .map((m) => store.render(m) as ApiMessage);
    },

    message(id) {
      const message = world.messages.get(id);
      return message && !message.deleted ? (store.render(message) as ApiMessage) : undefined;
    },

    get interactions() {
      return [...interactions.values()];
    },

    async waitFor(check, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = check();
        if (value) return value as NonNullable<ReturnType<typeof check>>;
        if (Date.now() > deadline) throw new Error(`fake Discord: waitFor timed out after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },

    async close() {
      for (const { timer } of waiting.values()) clearTimeout(timer);
      waiting.clear();
      await gateway.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
