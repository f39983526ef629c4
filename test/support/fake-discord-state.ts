// The fake Discord's world: users, guilds, channels and messages, and how each is written on the wire (the shapes
// of Discord's API v10 objects, field for field where discord.js reads them).

const DISCORD_EPOCH = 1_420_070_400_000n;
let increment = 0n;

/** A snowflake made the way Discord makes them: milliseconds since 2015 in the top bits, so ids sort by time. */
export function snowflake(at = Date.now()): string {
  increment = (increment + 1n) & 0xfffn;
  return (((BigInt(at) - DISCORD_EPOCH) << 22n) | (1n << 17n) | increment).toString();
}

export const ChannelKind = { GuildText: 0, DM: 1, GuildCategory: 4, GuildAnnouncement: 5, PublicThread: 11, PrivateThread: 12, GuildForum: 15 } as const;

export const Intent = {
  Guilds: 1 << 0,
  GuildMembers: 1 << 1,
  GuildPresences: 1 << 8,
  GuildMessages: 1 << 9,
  GuildMessageReactions: 1 << 10,
  DirectMessages: 1 << 12,
  DirectMessageReactions: 1 << 13,
  MessageContent: 1 << 15,
} as const;
export const PRIVILEGED_INTENTS = Intent.GuildMembers | Intent.GuildPresences | Intent.MessageContent;
/** Every intent bit Discord knows (0–21, 24–25); another one closes the gateway with 4013. */
export const KNOWN_INTENTS = (1 << 22) - 1 + (1 << 24) + (1 << 25);

export const MessageFlag = { SuppressEmbeds: 1 << 2, Ephemeral: 1 << 6, Loading: 1 << 7, SuppressNotifications: 1 << 12, IsComponentsV2: 1 << 15 } as const;

export interface ApiUser {
  id: string;
  username: string;
  discriminator: string;
  global_name: string | null;
  avatar: null;
  bot?: boolean;
  public_flags: number;
}

export interface ApiRole {
  id: string;
  name: string;
  color: number;
  hoist: boolean;
  position: number;
  permissions: string;
  managed: boolean;
  mentionable: boolean;
  flags: number;
  tags?: { bot_id: string };
}

export interface StoredChannel {
  id: string;
  type: number;
  name?: string;
  guild_id?: string;
  parent_id?: string | null;
  position?: number;
  /** DMs: the other person. */
  recipient_id?: string;
  /** Threads: who started it, and the message it was started from (same id as the thread). */
  owner_id?: string;
  archived?: boolean;
  /** When it was last archived or unarchived (ms). */
  archived_at?: number;
  auto_archive_duration?: number;
  created_at: number;
  last_message_id: string | null;
  message_count: number;
}

export interface StoredGuild {
  id: string;
  name: string;
  owner_id: string;
  roles: ApiRole[];
  member_ids: string[];
  /** The role Discord gives a bot when it joins (managed, tagged with the bot's id). */
  bot_role_id: string;
  joined_at: string;
}

export interface StoredAttachment {
  id: string;
  filename: string;
  size: number;
  content_type?: string;
  bytes: Buffer;
}

export interface StoredMessage {
  id: string;
  channel_id: string;
  guild_id?: string;
  author_id: string;
  type: number;
  content: string;
  components: unknown[];
  embeds: unknown[];
  attachments: StoredAttachment[];
  flags: number;
  mentions: string[];
  mention_roles: string[];
  mention_everyone: boolean;
  message_reference?: { type: number; message_id: string; channel_id: string; guild_id?: string };
  nonce?: string | number;
  created_at: number;
  edited_at: number | null;
  edits: number;
  reactions: Map<string, Set<string>>;
  deleted: boolean;
  /** Set on a reply to an interaction: who clicked, and the message clicked. */
  interaction?: { id: string; user_id: string; interacted_message_id?: string };
  /** The thread started from this message. */
  thread_id?: string;
}

export interface GuildConfig {
  id?: string;
  name?: string;
  channels?: { id?: string; name: string; type?: number; parent?: string }[];
  /** Active threads the bot can see when it connects; `parent` names a channel of this guild. */
  threads?: { id?: string; name: string; parent: string; type?: number }[];
  roles?: { id?: string; name: string; permissions?: string; mentionable?: boolean }[];
  /** Usernames or ids of the configured users in this guild (all of them by default); the bot is always one. */
  members?: string[];
  owner?: string;
}

export type UserConfig = { id?: string; username: string; global_name?: string | null; bot?: boolean };

const EVERYONE_PERMISSIONS = '2248473465835073';
const BOT_PERMISSIONS = '2248473465835073';

export function apiUser(config: UserConfig): ApiUser {
  return {
    id: config.id ?? snowflake(),
    username: config.username,
    discriminator: '0',
    global_name: config.global_name === undefined ? config.username : config.global_name,
    avatar: null,
    ...(config.bot && { bot: true }),
    public_flags: 0,
  };
}

function role(id: string, name: string, position: number, extra: Partial<ApiRole> = {}): ApiRole {
  return { id, name, color: 0, hoist: false, position, permissions: EVERYONE_PERMISSIONS, managed: false, mentionable: false, flags: 0, ...extra };
}

export const DEFAULT_USERS: UserConfig[] = [
  { username: 'alice', global_name: 'Alice' },
  { username: 'bob', global_name: 'Bob' },
];

/** One guild with a category, `general`, `support` (a thread parent with an active thread `open-question`) and a
 * mentionable `moderators` role. */
export const DEFAULT_GUILD: GuildConfig = {
  name: 'Parlor Test',
  channels: [
    { name: 'Text Channels', type: ChannelKind.GuildCategory },
    { name: 'general', parent: 'Text Channels' },
    { name: 'support', parent: 'Text Channels' },
  ],
  threads: [{ name: 'open-question', parent: 'support' }],
  roles: [{ name: 'moderators', mentionable: true }],
};

export class World {
  users = new Map<string, ApiUser>();
  guilds = new Map<string, StoredGuild>();
  channels = new Map<string, StoredChannel>();
  messages = new Map<string, StoredMessage>();
  dmChannels = new Map<string, string>();

  constructor(
    readonly bot: ApiUser,
    users: UserConfig[],
    guilds: GuildConfig[],
  ) {
    this.users.set(bot.id, bot);
    for (const config of users) {
      const user = apiUser(config);
      this.users.set(user.id, user);
    }
    for (const config of guilds) this.addGuild(config);
  }

  private addGuild(config: GuildConfig) {
    const id = config.id ?? snowflake();
    const people = [...this.users.values()].filter((u) => u.id !== this.bot.id);
    const members = config.members ? config.members.map((ref) => this.user(ref).id) : people.map((u) => u.id);
    const botRoleId = snowflake();
    const roles = [
      role(id, '@everyone', 0),
      ...(config.roles ?? []).map((r, i) => role(r.id ?? snowflake(), r.name, i + 1, { mentionable: r.mentionable ?? false, ...(r.permissions && { permissions: r.permissions }) })),
      role(botRoleId, this.bot.username, (config.roles?.length ?? 0) + 1, { managed: true, permissions: BOT_PERMISSIONS, tags: { bot_id: this.bot.id } }),
    ];
    const guild: StoredGuild = {
      id,
      name: config.name ?? 'Guild',
      owner_id: config.owner ? this.user(config.owner).id : (members[0] ?? this.bot.id),
      roles,
      member_ids: [this.bot.id, ...members],
      bot_role_id: botRoleId,
      joined_at: new Date().toISOString(),
    };
    this.guilds.set(id, guild);
    const byName = new Map<string, string>();
    for (const [position, c] of (config.channels ?? []).entries()) {
      const channel: StoredChannel = {
        id: c.id ?? snowflake(),
        type: c.type ?? ChannelKind.GuildText,
        name: c.name,
        guild_id: id,
        parent_id: c.parent ? byName.get(c.parent) ?? null : null,
        position,
        created_at: Date.now(),
        last_message_id: null,
        message_count: 0,
      };
      byName.set(c.name, channel.id);
      this.channels.set(channel.id, channel);
    }
    for (const t of config.threads ?? []) {
      const parent = byName.get(t.parent);
      if (!parent) throw new Error(`fake Discord: thread ${t.name} names an unknown parent ${t.parent}`);
      this.addThread({ id: t.id, guild_id: id, parent_id: parent, name: t.name, type: t.type, owner_id: members[0] ?? this.bot.id });
    }
  }

  /** `at`: when it was started (ms), now by default. */
  addThread(t: { id?: string; guild_id: string; parent_id: string; name: string; type?: number; owner_id: string; auto_archive_duration?: number; at?: number }): StoredChannel {
    const thread: StoredChannel = {
      id: t.id ?? snowflake(t.at),
      type: t.type ?? ChannelKind.PublicThread,
      name: t.name,
      guild_id: t.guild_id,
      parent_id: t.parent_id,
      owner_id: t.owner_id,
      archived: false,
      auto_archive_duration: t.auto_archive_duration ?? 4320,
      created_at: t.at ?? Date.now(),
      last_message_id: null,
      message_count: 0,
    };
    this.channels.set(thread.id, thread);
    return thread;
  }

  /** A configured user by id or username (the bot included). */
  user(ref: string): ApiUser {
    const user = this.users.get(ref) ?? [...this.users.values()].find((u) => u.username === ref);
    if (!user) throw new Error(`fake Discord: no user ${ref}`);
    return user;
  }

  /** A channel by id, or a guild channel or thread by name. */
  channel(ref: string): StoredChannel {
    const channel = this.channels.get(ref) ?? [...this.channels.values()].find((c) => c.name === ref);
    if (!channel) throw new Error(`fake Discord: no channel ${ref}`);
    return channel;
  }

  /** The DM channel with a person, opened on first use (the same one every time, as on Discord). */
  dmChannel(userId: string): StoredChannel {
    const existing = this.dmChannels.get(userId);
    if (existing) return this.channels.get(existing)!;
    const channel: StoredChannel = { id: snowflake(), type: ChannelKind.DM, recipient_id: userId, created_at: Date.now(), last_message_id: null, message_count: 0 };
    this.channels.set(channel.id, channel);
    this.dmChannels.set(userId, channel.id);
    return channel;
  }

  isThread(channel: StoredChannel) {
    return channel.type === ChannelKind.PublicThread || channel.type === ChannelKind.PrivateThread || channel.type === 10;
  }

  member(guild: StoredGuild, userId: string, withUser = true) {
    const roles = userId === this.bot.id ? [guild.bot_role_id] : [];
    return {
      ...(withUser && { user: this.users.get(userId) }),
      nick: null,
      avatar: null,
      banner: null,
      roles,
      joined_at: guild.joined_at,
      premium_since: null,
      deaf: false,
      mute: false,
      flags: 0,
      pending: false,
      communication_disabled_until: null,
    };
  }

  channelObject(channel: StoredChannel, inGuildCreate = false): Record<string, unknown> {
    if (channel.type === ChannelKind.DM) {
      return { id: channel.id, type: 1, last_message_id: channel.last_message_id, flags: 0, recipients: [this.users.get(channel.recipient_id!)] };
    }
    const common = {
      id: channel.id,
      type: channel.type,
      ...(!inGuildCreate && { guild_id: channel.guild_id }),
      name: channel.name,
      parent_id: channel.parent_id ?? null,
      last_message_id: channel.last_message_id,
      rate_limit_per_user: 0,
      flags: 0,
    };
    if (this.isThread(channel)) {
      const created = new Date(channel.created_at).toISOString();
      const archivedAt = new Date(channel.archived_at ?? channel.created_at).toISOString();
      return {
        ...common,
        guild_id: channel.guild_id,
        owner_id: channel.owner_id,
        message_count: channel.message_count,
        total_message_sent: channel.message_count,
        member_count: 1,
        thread_metadata: { archived: channel.archived ?? false, auto_archive_duration: channel.auto_archive_duration, archive_timestamp: archivedAt, locked: false, create_timestamp: created },
      };
    }
    return { ...common, position: channel.position ?? 0, permission_overwrites: [], topic: null, nsfw: false, default_thread_rate_limit_per_user: 0 };
  }

  /** GUILD_CREATE: the guild with its roles, channels, active threads and members. */
  guildCreate(guild: StoredGuild): Record<string, unknown> {
    const channels = [...this.channels.values()].filter((c) => c.guild_id === guild.id);
    return {
      ...this.guildObject(guild),
      joined_at: guild.joined_at,
      large: false,
      unavailable: false,
      member_count: guild.member_ids.length,
      voice_states: [],
      members: guild.member_ids.map((id) => this.member(guild, id)),
      channels: channels.filter((c) => !this.isThread(c)).map((c) => this.channelObject(c, true)),
      threads: channels.filter((c) => this.isThread(c) && !c.archived).map((c) => this.channelObject(c, true)),
      presences: [],
      stage_instances: [],
      guild_scheduled_events: [],
      soundboard_sounds: [],
    };
  }

  guildObject(guild: StoredGuild): Record<string, unknown> {
    const general = [...this.channels.values()].find((c) => c.guild_id === guild.id && c.type === ChannelKind.GuildText);
    return {
      id: guild.id,
      name: guild.name,
      icon: null,
      splash: null,
      discovery_splash: null,
      owner_id: guild.owner_id,
      afk_channel_id: null,
      afk_timeout: 300,
      verification_level: 0,
      default_message_notifications: 0,
      explicit_content_filter: 0,
      roles: guild.roles,
      emojis: [],
      stickers: [],
      features: [],
      mfa_level: 0,
      application_id: null,
      system_channel_id: general?.id ?? null,
      system_channel_flags: 0,
      rules_channel_id: null,
      public_updates_channel_id: null,
      safety_alerts_channel_id: null,
      vanity_url_code: null,
      description: null,
      banner: null,
      premium_tier: 0,
      premium_subscription_count: 0,
      preferred_locale: 'en-US',
      nsfw_level: 0,
      premium_progress_bar_enabled: false,
    };
  }

  /** A message as the API writes it; `gateway` adds what MESSAGE_CREATE carries beyond the REST object. */
  messageObject(message: StoredMessage, { gateway = false, attachmentUrl }: { gateway?: boolean; attachmentUrl: (a: StoredAttachment, m: StoredMessage) => string }): Record<string, any> {
    const channel = this.channels.get(message.channel_id)!;
    const guild = message.guild_id ? this.guilds.get(message.guild_id) : undefined;
    const author = this.users.get(message.author_id)!;
    const referenced = message.message_reference ? this.messages.get(message.message_reference.message_id) : undefined;
    const reactions = [...message.reactions].filter(([, users]) => users.size > 0);
    const object: Record<string, any> = {
      id: message.id,
      type: message.type,
      channel_id: message.channel_id,
      ...(message.guild_id && { guild_id: message.guild_id }),
      author,
      content: message.content,
      timestamp: new Date(message.created_at).toISOString(),
      edited_timestamp: message.edited_at === null ? null : new Date(message.edited_at).toISOString(),
      tts: false,
      mention_everyone: message.mention_everyone,
      mentions: message.mentions.map((id) => ({ ...this.users.get(id), ...(guild && gateway && { member: this.member(guild, id, false) }) })),
      mention_roles: message.mention_roles,
      attachments: message.attachments.map((a) => ({ id: a.id, filename: a.filename, size: a.size, ...(a.content_type && { content_type: a.content_type }), url: attachmentUrl(a, message), proxy_url: attachmentUrl(a, message) })),
      embeds: message.embeds,
      pinned: false,
      flags: message.flags,
      components: message.components,
      ...(message.nonce !== undefined && { nonce: message.nonce }),
      ...(reactions.length && {
        reactions: reactions.map(([emoji, users]) => ({ count: users.size, count_details: { burst: 0, normal: users.size }, me: users.has(this.bot.id), me_burst: false, emoji: emojiObject(emoji), burst_colors: [] })),
      }),
      ...(message.message_reference && { message_reference: message.message_reference }),
      ...(message.message_reference && { referenced_message: referenced && !referenced.deleted ? this.messageObject(referenced, { attachmentUrl }) : null }),
      ...(message.interaction && {
        interaction_metadata: { id: message.interaction.id, type: 3, user: this.users.get(message.interaction.user_id), authorizing_integration_owners: guild ? { '0': guild.id } : { '1': message.interaction.user_id }, ...(message.interaction.interacted_message_id && { interacted_message_id: message.interaction.interacted_message_id }) },
        application_id: this.bot.id,
        webhook_id: this.bot.id,
      }),
      ...(message.thread_id && this.channels.has(message.thread_id) && { thread: this.channelObject(this.channels.get(message.thread_id)!) }),
    };
    if (gateway && guild) object.member = this.member(guild, author.id, false);
    if (gateway && channel.type === ChannelKind.DM) object.channel_type = ChannelKind.DM;
    return object;
  }
}

export function emojiObject(emoji: string): { id: string | null; name: string; animated?: boolean } {
  const custom = /^(?:a:)?([^:]+):(\d+)$/.exec(emoji);
  return custom ? { id: custom[2], name: custom[1], animated: emoji.startsWith('a:') } : { id: null, name: emoji };
}
