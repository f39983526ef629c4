// The fake Discord's routes: what each REST call a bot makes does to the world (messages, threads, DMs, interaction
// callbacks and their webhooks), with Discord's validation and error codes.
import type { MessageStore } from './fake-discord-messages.ts';
import { fail, json, noContent, type Reply, type RestRequest, type Route, type RouteHandler } from './fake-discord-rest.ts';
import { apiError, mentionsIn, messageBodyErrors, settableFlags } from './fake-discord-checks.ts';
import { ChannelKind, MessageFlag, type StoredAttachment, type StoredChannel, type StoredMessage, type World } from './fake-discord-state.ts';

export interface InteractionCallback {
  interactionId: string;
  token: string;
  type: number;
  data?: any;
  at: number;
  /** From the INTERACTION_CREATE dispatch to the callback's arrival. */
  latencyMs: number;
}

export interface InteractionRecord {
  id: string;
  token: string;
  customId: string;
  channelId: string;
  guildId?: string;
  messageId: string;
  userId: string;
  dispatchedAt: number;
  callback?: InteractionCallback;
  /** The message `@original` names: the reply (types 4/5) or the clicked message (types 6/7). */
  originalMessageId?: string;
  followups: string[];
}

export interface RouteContext {
  world: World;
  store: MessageStore;
  application: { id: string; flags: number };
  urls: () => { gateway: string };
  interactions: Map<string, InteractionRecord>;
  onCallback: (interaction: InteractionRecord) => void;
  interactionWindowMs: number;
  interactionTtlMs: number;
  sessionStartRemaining: () => number;
}

const unknownChannel = () => fail(404, 10003, 'Unknown Channel');
const unknownMessage = () => fail(404, 10008, 'Unknown Message');
const UPLOAD_LIMIT = 10 * 1024 * 1024;

export function createRoutes(ctx: RouteContext): Route[] {
  const { world, store } = ctx;
  const nonces = new Map<string, string>();
  const render = (m: StoredMessage) => store.render(m);

  const channelOf = (id: string) => world.channels.get(id);
  const liveMessage = (channel: StoredChannel, id: string) => {
    const message = world.messages.get(id);
    return message && !message.deleted && message.channel_id === channel.id && !(message.flags & MessageFlag.Ephemeral) ? message : undefined;
  };

  const attachmentsOf = (req: RestRequest) =>
    req.files.map((f, i): Omit<StoredAttachment, 'id'> => {
      const index = /^files\[(\d+)\]$/.exec(f.field)?.[1] ?? String(i);
      const described = (req.body.attachments ?? []).find((a: any) => String(a.id) === index);
      return { filename: described?.filename ?? f.name, size: f.size, ...(f.contentType && { content_type: f.contentType }), bytes: f.bytes };
    });

  /** Validates a message body and works out whom it pings; a Reply when Discord would refuse it. */
  function prepare(req: RestRequest, channel: StoredChannel, creating: boolean) {
    const body = req.body;
    if (req.files.some((f) => f.size > UPLOAD_LIMIT)) return { refused: fail(413, 40005, 'Request entity too large') };
    const { errors, empty } = messageBodyErrors(body, { creating, files: req.files.length });
    if (errors.length) return { refused: json(400, apiError(50035, 'Invalid Form Body', errors)) };
    if (empty) return { refused: fail(400, 50006, 'Cannot send an empty message') };
    let reference: StoredMessage | undefined;
    if (body.message_reference?.message_id) {
      reference = world.messages.get(body.message_reference.message_id);
      if (!reference || reference.deleted || reference.channel_id !== (body.message_reference.channel_id ?? channel.id)) {
        reference = undefined;
        if (body.message_reference.fail_if_not_exists !== false) {
          return { refused: json(400, apiError(50035, 'Invalid Form Body', [{ path: ['message_reference'], code: 'MESSAGE_REFERENCE_UNKNOWN_MESSAGE', message: 'Unknown message' }])) };
        }
      }
    }
    const pinged = mentionsIn(body.content ?? '', body.allowed_mentions);
    // A reply pings its author unless allowed_mentions is given without replied_user: true.
    if (reference && (!body.allowed_mentions || body.allowed_mentions.replied_user) && !pinged.users.includes(reference.author_id)) pinged.users.push(reference.author_id);
    return { reference, pinged };
  }

  function createFrom(req: RestRequest, channel: StoredChannel, extra: { flags?: number; interaction?: StoredMessage['interaction']; id?: string } = {}): Reply | StoredMessage {
    const prepared = prepare(req, channel, true);
    if (prepared.refused) return prepared.refused;
    const body = req.body;
    return store.create({
      channel,
      authorId: world.bot.id,
      content: body.content,
      components: body.components,
      embeds: body.embeds,
      attachments: attachmentsOf(req),
      flags: extra.flags ?? settableFlags(body.flags),
      mentions: prepared.pinged!.users,
      mention_roles: prepared.pinged!.roles,
      mention_everyone: prepared.pinged!.everyone,
      reference: prepared.reference,
      nonce: body.nonce,
      interaction: extra.interaction,
      id: extra.id,
    });
  }

  function editFrom(req: RestRequest, message: StoredMessage): Reply {
    const channel = channelOf(message.channel_id)!;
    const prepared = prepare(req, channel, false);
    if (prepared.refused) return prepared.refused;
    const changes = { ...req.body, newAttachments: attachmentsOf(req) };
    if ('content' in req.body) Object.assign(message, { mentions: prepared.pinged!.users, mention_roles: prepared.pinged!.roles, mention_everyone: prepared.pinged!.everyone });
    return json(200, render(store.edit(message, changes)));
  }

  const sendMessage: RouteHandler = (req) => {
    const channel = channelOf(req.params.channel);
    if (!channel || channel.type === ChannelKind.GuildCategory) return unknownChannel();
    // As Discord: a message sent in an archived thread (not locked) unarchives it; an edit or a reaction there is refused.
    if (channel.archived) store.setArchived(channel, false);
    const nonceKey = `${channel.id}:${req.body.nonce}`;
    if (req.body.enforce_nonce && req.body.nonce !== undefined && nonces.has(nonceKey)) {
      const earlier = world.messages.get(nonces.get(nonceKey)!);
      if (earlier && Date.now() - earlier.created_at < 5 * 60_000) return json(200, render(earlier));
    }
    const created = createFrom(req, channel);
    if (!('id' in created)) return created;
    if (req.body.nonce !== undefined) nonces.set(nonceKey, created.id);
    return json(200, render(created));
  };

  const startThread: RouteHandler = (req) => {
    const parent = channelOf(req.params.channel);
    if (!parent || !parent.guild_id || world.isThread(parent)) return unknownChannel();
    const name = String(req.body.name ?? '');
    if (!name || [...name].length > 100) return json(400, apiError(50035, 'Invalid Form Body', [{ path: ['name'], code: name ? 'BASE_TYPE_BAD_LENGTH' : 'BASE_TYPE_REQUIRED', message: name ? 'Must be between 1 and 100 in length.' : 'This field is required' }]));
    let from: StoredMessage | undefined;
    if (req.params.message) {
      from = liveMessage(parent, req.params.message);
      if (!from) return unknownMessage();
      if (from.thread_id) return fail(400, 160004, 'A thread has already been created for this message');
    }
    const thread = world.addThread({
      // A thread started from a message takes the message's id.
      id: from?.id,
      guild_id: parent.guild_id,
      parent_id: parent.id,
      name,
      type: from ? ChannelKind.PublicThread : (req.body.type ?? ChannelKind.PrivateThread),
      owner_id: world.bot.id,
      auto_archive_duration: req.body.auto_archive_duration,
    });
    if (from) from.thread_id = thread.id;
    store.announceThread(thread);
    if (parent.type === ChannelKind.GuildForum && req.body.message) {
      const starter = createFrom({ ...req, body: req.body.message }, thread, { id: thread.id });
      if (!('id' in starter)) return starter;
    }
    return json(201, world.channelObject(thread));
  };

  function interactionFor(req: RestRequest): InteractionRecord | Reply {
    const interaction = [...ctx.interactions.values()].find((i) => i.token === req.params.token);
    if (!interaction || req.params.application !== ctx.application.id) return fail(404, 10015, 'Unknown Webhook');
    if (Date.now() - interaction.dispatchedAt > ctx.interactionTtlMs) return fail(401, 50027, 'Invalid Webhook Token');
    if (!interaction.callback) return fail(404, 10015, 'Unknown Webhook');
    return interaction;
  }

  const webhookMessage = (interaction: InteractionRecord, id: string) => {
    const message = world.messages.get(id === '@original' ? (interaction.originalMessageId ?? '') : id);
    return message && !message.deleted && (id === '@original' || interaction.followups.includes(message.id)) ? message : undefined;
  };

  const interactionCallback: RouteHandler = (req) => {
    const interaction = ctx.interactions.get(req.params.interaction);
    if (!interaction || interaction.token !== req.params.token) return fail(404, 10062, 'Unknown interaction');
    if (interaction.callback) return fail(400, 40060, 'Interaction has already been acknowledged.');
    // Discord gives three seconds; after that the user sees "This interaction failed".
    if (Date.now() - interaction.dispatchedAt > ctx.interactionWindowMs) return fail(404, 10062, 'Unknown interaction');
    const { type, data = {} } = req.body;
    const channel = channelOf(interaction.channelId)!;
    const clicked = world.messages.get(interaction.messageId);
    const meta = { id: interaction.id, user_id: interaction.userId, interacted_message_id: interaction.messageId };
    const ephemeral = (Number(data.flags ?? 0) & MessageFlag.Ephemeral) !== 0;
    let response: StoredMessage | undefined;
    if (type === 4) {
      const created = createFrom({ ...req, body: data }, channel, { flags: settableFlags(data.flags) | (ephemeral ? MessageFlag.Ephemeral : 0), interaction: meta });
      if (!('id' in created)) return created;
      response = created;
    } else if (type === 5) {
      response = store.create({ channel, authorId: world.bot.id, flags: MessageFlag.Loading | (ephemeral ? MessageFlag.Ephemeral : 0), interaction: meta });
    } else if (type === 7) {
      if (!clicked) return unknownMessage();
      const edited = editFrom({ ...req, body: data }, clicked);
      if (edited.status !== 200) return edited;
      response = clicked;
    } else if (type !== 6 && type !== 9) {
      return json(400, apiError(50035, 'Invalid Form Body', [{ path: ['type'], code: 'INTERACTION_RESPONSE_TYPE_INVALID', message: 'Invalid interaction response type' }]));
    }
    const at = Date.now();
    interaction.callback = { interactionId: interaction.id, token: interaction.token, type, ...(req.body.data !== undefined && { data: req.body.data }), at, latencyMs: at - interaction.dispatchedAt };
    interaction.originalMessageId = type === 4 || type === 5 ? response!.id : interaction.messageId;
    ctx.onCallback(interaction);
    if (req.query.get('with_response') !== 'true') return noContent;
    return json(200, {
      interaction: { id: interaction.id, type: 3, response_message_id: interaction.originalMessageId, response_message_loading: type === 5, response_message_ephemeral: ephemeral },
      resource: { type, ...(response && { message: render(response) }) },
    });
  };

  const routes: Route[] = [
    { method: 'GET', pattern: '/gateway', auth: false, handle: () => json(200, { url: ctx.urls().gateway }) },
    {
      method: 'GET',
      pattern: '/gateway/bot',
      handle: () => json(200, { url: ctx.urls().gateway, shards: 1, session_start_limit: { total: 1000, remaining: ctx.sessionStartRemaining(), reset_after: 14_400_000, max_concurrency: 1 } }),
    },
    { method: 'GET', pattern: '/users/@me', handle: () => json(200, { ...world.bot, verified: true, mfa_enabled: false, flags: 0, email: null, locale: 'en-US' }) },
    { method: 'GET', pattern: '/users/:user', handle: (req) => (world.users.has(req.params.user) ? json(200, world.users.get(req.params.user)) : fail(404, 10013, 'Unknown User')) },
    {
      method: 'POST',
      pattern: '/users/@me/channels',
      handle: (req) => {
        const user = world.users.get(String(req.body.recipient_id));
        if (!user) return fail(400, 50035, 'Invalid Form Body');
        if (user.bot) return fail(403, 50007, 'Cannot send messages to this user');
        return json(200, world.channelObject(world.dmChannel(user.id)));
      },
    },
    { method: 'GET', pattern: '/applications/@me', handle: () => json(200, { id: ctx.application.id, name: world.bot.username, icon: null, description: '', bot_public: false, bot_require_code_grant: false, flags: ctx.application.flags, bot: world.bot, owner: [...world.users.values()].find((u) => !u.bot) ?? null }) },
    { method: 'GET', pattern: '/guilds/:guild', handle: (req) => (world.guilds.has(req.params.guild) ? json(200, world.guildObject(world.guilds.get(req.params.guild)!)) : fail(404, 10004, 'Unknown Guild')) },
    {
      method: 'GET',
      pattern: '/guilds/:guild/channels',
      handle: (req) => json(200, [...world.channels.values()].filter((c) => c.guild_id === req.params.guild && !world.isThread(c)).map((c) => world.channelObject(c))),
    },
    {
      method: 'GET',
      pattern: '/guilds/:guild/members/:user',
      handle: (req) => {
        const guild = world.guilds.get(req.params.guild);
        if (!guild) return fail(404, 10004, 'Unknown Guild');
        return guild.member_ids.includes(req.params.user) ? json(200, world.member(guild, req.params.user)) : fail(404, 10007, 'Unknown Member');
      },
    },
    { method: 'GET', pattern: '/channels/:channel', handle: (req) => (channelOf(req.params.channel) ? json(200, world.channelObject(channelOf(req.params.channel)!)) : unknownChannel()) },
    {
      method: 'GET',
      pattern: '/channels/:channel/messages',
      handle: (req) => {
        const channel = channelOf(req.params.channel);
        if (!channel) return unknownChannel();
        const limit = Math.min(100, Number(req.query.get('limit') ?? 50));
        const before = req.query.get('before');
        const after = req.query.get('after');
        const newestFirst = [...world.messages.values()]
          .filter((m) => liveMessage(channel, m.id))
          .filter((m) => (!before || BigInt(m.id) < BigInt(before)) && (!after || BigInt(m.id) > BigInt(after)))
          .sort((a, b) => (BigInt(b.id) > BigInt(a.id) ? 1 : -1));
        // As Discord: `after` pages forward (the messages right after it), the rest back from the newest; newest first.
        const list = after && !before ? newestFirst.slice(-limit) : newestFirst.slice(0, limit);
        return json(200, list.map(render));
      },
    },
    {
      method: 'GET',
      pattern: '/channels/:channel/threads/archived/public',
      handle: (req) => {
        const channel = channelOf(req.params.channel);
        if (!channel) return unknownChannel();
        const before = req.query.get('before');
        const limit = Math.min(100, Number(req.query.get('limit') ?? 50));
        // The channel's archived public threads, the most recently archived first.
        const archived = [...world.channels.values()]
          .filter((c) => world.isThread(c) && c.parent_id === channel.id && c.archived && c.type === ChannelKind.PublicThread)
          .filter((c) => !before || (c.archived_at ?? c.created_at) < Date.parse(before))
          .sort((a, b) => (b.archived_at ?? b.created_at) - (a.archived_at ?? a.created_at));
        return json(200, { threads: archived.slice(0, limit).map((c) => world.channelObject(c)), members: [], has_more: archived.length > limit });
      },
    },
    {
      method: 'GET',
      pattern: '/channels/:channel/messages/:message',
      handle: (req) => {
        const channel = channelOf(req.params.channel);
        if (!channel) return unknownChannel();
        const message = liveMessage(channel, req.params.message);
        return message ? json(200, render(message)) : unknownMessage();
      },
    },
    { method: 'POST', pattern: '/channels/:channel/messages', handle: sendMessage },
    {
      method: 'PATCH',
      pattern: '/channels/:channel/messages/:message',
      handle: (req) => {
        const channel = channelOf(req.params.channel);
        if (!channel) return unknownChannel();
        const message = liveMessage(channel, req.params.message);
        if (!message) return unknownMessage();
        if (message.author_id !== world.bot.id) return fail(403, 50005, 'Cannot edit a message authored by another user');
        if (channel.archived) return fail(400, 50083, 'Thread is archived');
        return editFrom(req, message);
      },
    },
    {
      method: 'DELETE',
      pattern: '/channels/:channel/messages/:message',
      handle: (req) => {
        const channel = channelOf(req.params.channel);
        if (!channel) return unknownChannel();
        const message = liveMessage(channel, req.params.message);
        if (!message) return unknownMessage();
        store.remove(message);
        return noContent;
      },
    },
    ...(['PUT', 'DELETE'] as const).map((method) => ({
      method,
      pattern: '/channels/:channel/messages/:message/reactions/:emoji/@me',
      handle: (req: RestRequest): Reply => {
        const channel = channelOf(req.params.channel);
        if (!channel) return unknownChannel();
        const message = liveMessage(channel, req.params.message);
        if (!message) return unknownMessage();
        if (!req.params.emoji) return fail(400, 10014, 'Unknown Emoji');
        if (channel.archived) return fail(400, 50083, 'Thread is archived');
        store.react(message, world.bot.id, req.params.emoji, method === 'PUT');
        return noContent;
      },
    })),
    { method: 'POST', pattern: '/channels/:channel/typing', handle: (req) => (channelOf(req.params.channel) ? noContent : unknownChannel()) },
    { method: 'POST', pattern: '/channels/:channel/threads', handle: startThread },
    { method: 'POST', pattern: '/channels/:channel/messages/:message/threads', handle: startThread },
    { method: 'PUT', pattern: '/channels/:channel/thread-members/@me', handle: (req) => (channelOf(req.params.channel) ? noContent : unknownChannel()) },
    { method: 'POST', pattern: '/interactions/:interaction/:token/callback', auth: false, handle: interactionCallback },
    {
      method: 'POST',
      pattern: '/webhooks/:application/:token',
      auth: false,
      handle: (req) => {
        const interaction = interactionFor(req);
        if (!('id' in interaction)) return interaction;
        const original = interaction.originalMessageId ? world.messages.get(interaction.originalMessageId) : undefined;
        // The first follow-up after a deferred reply (type 5) fills in the "thinking…" message.
        if (original && original.flags & MessageFlag.Loading && interaction.callback?.type === 5) {
          const edited = editFrom(req, original);
          return req.query.get('wait') === 'true' || edited.status !== 200 ? edited : noContent;
        }
        const flags = settableFlags(req.body.flags) | (Number(req.body.flags ?? 0) & MessageFlag.Ephemeral);
        const meta = { id: interaction.id, user_id: interaction.userId };
        const created = createFrom(req, channelOf(req.query.get('thread_id') ?? interaction.channelId) ?? channelOf(interaction.channelId)!, { flags, interaction: meta });
        if (!('id' in created)) return created;
        interaction.followups.push(created.id);
        return req.query.get('wait') === 'true' ? json(200, render(created)) : noContent;
      },
    },
    ...(['GET', 'PATCH', 'DELETE'] as const).map((method) => ({
      method,
      pattern: '/webhooks/:application/:token/messages/:message',
      auth: false as const,
      handle: (req: RestRequest): Reply => {
        const interaction = interactionFor(req);
        if (!('id' in interaction)) return interaction;
        const message = webhookMessage(interaction, req.params.message);
        if (!message) return unknownMessage();
        if (method === 'GET') return json(200, render(message));
        if (method === 'PATCH') return editFrom(req, message);
        store.remove(message);
        return noContent;
      },
    })),
  ];

  return routes;
}
