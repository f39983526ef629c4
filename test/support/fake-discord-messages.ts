// Messages and reactions as Discord keeps them, and which gateway sessions hear of them: an event goes out only
// under the intents that cover it, and without MESSAGE_CONTENT a guild message arrives emptied unless it is the
// bot's own or mentions the bot (DMs always carry their content).
import type { FakeGateway, GatewaySession } from './fake-discord-gateway.ts';
import { ChannelKind, emojiObject, Intent, MessageFlag, snowflake, type StoredAttachment, type StoredChannel, type StoredMessage, type World } from './fake-discord-state.ts';

export interface NewMessage {
  channel: StoredChannel;
  authorId: string;
  /** When it was posted (ms; its id says so too): now by default. */
  at?: number;
  content?: string;
  components?: unknown[];
  embeds?: unknown[];
  attachments?: Omit<StoredAttachment, 'id'>[];
  flags?: number;
  mentions?: string[];
  mention_roles?: string[];
  mention_everyone?: boolean;
  reference?: StoredMessage;
  nonce?: string | number;
  interaction?: StoredMessage['interaction'];
  /** Discord gives a thread's starter message the thread's id; the fake lets the caller choose an id. */
  id?: string;
}

export function createMessageStore(world: World, gateway: FakeGateway, attachmentUrl: (a: StoredAttachment, m: StoredMessage) => string) {
  const render = (message: StoredMessage, gatewayShape = false) => world.messageObject(message, { gateway: gatewayShape, attachmentUrl });

  const hears = (session: GatewaySession, channel: StoredChannel, dm: number, guild: number) => (session.intents & (channel.type === ChannelKind.DM ? dm : guild)) !== 0;

  /** The message as one session receives it, or undefined when its intents do not cover it. */
  const asSeenBy = (message: StoredMessage) => (session: GatewaySession) => {
    const channel = world.channels.get(message.channel_id)!;
    if (!hears(session, channel, Intent.DirectMessages, Intent.GuildMessages)) return undefined;
    const object = render(message, true);
    const readable =
      session.intents & Intent.MessageContent || channel.type === ChannelKind.DM || message.author_id === world.bot.id || message.mentions.includes(world.bot.id);
    return readable ? object : { ...object, content: '', embeds: [], attachments: [], components: [] };
  };

  function create(m: NewMessage): StoredMessage {
    const now = m.at ?? Date.now();
    const message: StoredMessage = {
      id: m.id ?? snowflake(now),
      channel_id: m.channel.id,
      ...(m.channel.guild_id && { guild_id: m.channel.guild_id }),
      author_id: m.authorId,
      type: m.reference ? 19 : 0,
      content: m.content ?? '',
      components: m.components ?? [],
      embeds: m.embeds ?? [],
      attachments: (m.attachments ?? []).map((a) => ({ id: snowflake(now), ...a })),
      flags: m.flags ?? 0,
      mentions: m.mentions ?? [],
      mention_roles: m.mention_roles ?? [],
      mention_everyone: m.mention_everyone ?? false,
      ...(m.reference && { message_reference: { type: 0, message_id: m.reference.id, channel_id: m.reference.channel_id, ...(m.reference.guild_id && { guild_id: m.reference.guild_id }) } }),
      ...(m.nonce !== undefined && { nonce: m.nonce }),
      ...(m.interaction && { interaction: m.interaction }),
      created_at: now,
      edited_at: null,
      edits: 0,
      reactions: new Map(),
      deleted: false,
    };
    world.messages.set(message.id, message);
    // A message dated in the past (see PersonMessage.postedAt) is not the channel's last unless it is the newest.
    if (!m.channel.last_message_id || BigInt(message.id) > BigInt(m.channel.last_message_id)) m.channel.last_message_id = message.id;
    m.channel.message_count++;
    // Ephemeral messages exist only for the person who clicked: no gateway event, no REST fetch.
    if (!(message.flags & MessageFlag.Ephemeral)) gateway.dispatch('MESSAGE_CREATE', asSeenBy(message));
    return message;
  }

  function edit(message: StoredMessage, changes: Record<string, any>): StoredMessage {
    if ('content' in changes) message.content = changes.content ?? '';
    if ('components' in changes) message.components = changes.components ?? [];
    if ('embeds' in changes) message.embeds = changes.embeds ?? [];
    if ('flags' in changes && typeof changes.flags === 'number') message.flags = (message.flags & (MessageFlag.Ephemeral | MessageFlag.IsComponentsV2)) | (changes.flags & MessageFlag.SuppressEmbeds);
    if (Array.isArray(changes.attachments)) {
      // Attachments kept are named by id; new uploads come as extra entries.
      const keep = new Set(changes.attachments.map((a: any) => String(a.id)));
      message.attachments = message.attachments.filter((a) => keep.has(a.id));
    }
    if (Array.isArray(changes.newAttachments)) message.attachments.push(...changes.newAttachments.map((a: Omit<StoredAttachment, 'id'>) => ({ id: snowflake(), ...a })));
    message.flags &= ~MessageFlag.Loading;
    message.edited_at = Date.now();
    message.edits++;
    if (!(message.flags & MessageFlag.Ephemeral)) gateway.dispatch('MESSAGE_UPDATE', asSeenBy(message));
    return message;
  }

  function remove(message: StoredMessage) {
    message.deleted = true;
    const channel = world.channels.get(message.channel_id)!;
    if (message.flags & MessageFlag.Ephemeral) return;
    gateway.dispatch('MESSAGE_DELETE', (session: GatewaySession) =>
      hears(session, channel, Intent.DirectMessages, Intent.GuildMessages) ? { id: message.id, channel_id: message.channel_id, ...(message.guild_id && { guild_id: message.guild_id }) } : undefined,
    );
  }

  function react(message: StoredMessage, userId: string, emoji: string, add: boolean) {
    const users = message.reactions.get(emoji) ?? new Set<string>();
    message.reactions.set(emoji, users);
    if (add === users.has(userId)) return;
    if (add) users.add(userId);
    else users.delete(userId);
    const channel = world.channels.get(message.channel_id)!;
    const guild = message.guild_id ? world.guilds.get(message.guild_id) : undefined;
    gateway.dispatch(add ? 'MESSAGE_REACTION_ADD' : 'MESSAGE_REACTION_REMOVE', (session: GatewaySession) =>
      hears(session, channel, Intent.DirectMessageReactions, Intent.GuildMessageReactions)
        ? {
            user_id: userId,
            type: 0,
            message_id: message.id,
            channel_id: message.channel_id,
            emoji: emojiObject(emoji),
            burst: false,
            ...(add && { message_author_id: message.author_id, burst_colors: [] }),
            ...(guild && { guild_id: guild.id, ...(add && { member: world.member(guild, userId) }) }),
          }
        : undefined,
    );
  }

  /** A thread Discord created: the bot hears THREAD_CREATE (under the Guilds intent). */
  function announceThread(thread: StoredChannel) {
    const joined = thread.owner_id === world.bot.id;
    const member = { id: thread.id, user_id: world.bot.id, join_timestamp: new Date().toISOString(), flags: 0 };
    gateway.dispatch('THREAD_CREATE', (session: GatewaySession) =>
      session.intents & Intent.Guilds ? { ...world.channelObject(thread), newly_created: true, ...(joined && { member }) } : undefined,
    );
  }

  /** A thread archived or unarchived now, with its THREAD_UPDATE. */
  function setArchived(thread: StoredChannel, archived: boolean) {
    thread.archived = archived;
    thread.archived_at = Date.now();
    gateway.dispatch('THREAD_UPDATE', (session: GatewaySession) => (session.intents & Intent.Guilds ? world.channelObject(thread) : undefined));
  }

  return { render, create, edit, remove, react, announceThread, setArchived };
}

export type MessageStore = ReturnType<typeof createMessageStore>;
