// What the fake Slack workspace holds (messages, ephemerals, files) and the Web API methods over it, for
// fake-slack.ts, which serves them over HTTP beside Socket Mode.
import { randomUUID } from 'node:crypto';
import {
  blockProblems,
  channelTypeOf,
  findElement,
  imChannelFor,
  isChannelId,
  isUserId,
  richTextBlocks,
  slackId,
  type SlackIdentity,
} from './fake-slack-payloads.ts';

export interface SlackMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  /** Who posted it: the bot's user id, or a person's. */
  user: string;
  bot_id?: string;
  text?: string;
  blocks?: any[];
  attachments?: any[];
  mrkdwn?: boolean;
  files?: SlackFile[];
  /** Emoji names on it (added by the bot). */
  reactions: string[];
  /** Message metadata the app posted with it (`chat.postMessage`'s `metadata`). */
  metadata?: { event_type: string; event_payload: Record<string, unknown> };
  /** How many times it was changed after posting (chat.update, a response_url replacement). */
  edits: number;
  /** The blocks it was posted with: a client that has not refreshed still shows (and clicks) their buttons. */
  postedBlocks?: any[];
  deleted: boolean;
}

export interface SlackEphemeral {
  channel: string;
  user: string;
  message_ts: string;
  thread_ts?: string;
  text?: string;
  blocks?: any[];
}

export interface SlackFile {
  id: string;
  name: string;
  title?: string;
  size: number;
  bytes?: Buffer;
}

export interface PostedResponse {
  url: string;
  body: Record<string, any>;
  at: number;
}

export interface SlackUserProfile {
  name?: string;
  real_name?: string;
  display_name?: string;
  is_bot?: boolean;
  tz?: string;
}

/** A click on a button of a message the bot posted, by action id or by label. */
export interface ClickSpec {
  message: { channel: string; ts: string };
  actionId?: string;
  label?: string;
  value?: string;
  user: string;
  /** Click a button the message had when posted, even if an update has taken it off since. */
  stale?: boolean;
}

export type Reply = Record<string, any>;
export const fail = (error: string, extra: Reply = {}): Reply => ({ ok: false, error, ...extra });

/** A page of a listing, as Slack pages one: `limit` items from the opaque `cursor` on, and the cursor of the next. */
function page<T>(items: readonly T[], limit: number, cursor: unknown, entry: (item: T) => Reply): Reply {
  const from = Number(cursor) || 0;
  const more = from + limit < items.length;
  return { messages: items.slice(from, from + limit).map(entry), has_more: more, response_metadata: { next_cursor: more ? String(from + limit) : '' } };
}

/** Methods called with the app-level token (`xapp-…`); every other method wants the bot token. */
const APP_TOKEN_METHODS = new Set(['apps.connections.open']);

export type SlackWorkspace = ReturnType<typeof createSlackWorkspace>;

export function createSlackWorkspace(config: {
  id: SlackIdentity;
  users?: Record<string, SlackUserProfile>;
  emoji?: string[];
  nextTs: () => string;
  /** `http://127.0.0.1:PORT`, for the upload and response URLs handed out. */
  baseUrl: () => string;
  /** An event Slack would send the bot about its own post, edit or deletion. */
  onBotEvent: (event: Record<string, any>) => void;
}) {
  const { id, users, emoji, nextTs, baseUrl, onBotEvent } = config;
  const store = new Map<string, SlackMessage[]>();
  const ephemerals: SlackEphemeral[] = [];
  const responses: PostedResponse[] = [];
  const responseUrls = new Map<string, { channel: string; ts: string; user: string; thread_ts?: string }>();
  const uploads = new Map<string, SlackFile & { uploaded: boolean }>();
  const statuses: { channel: string; thread_ts: string; status: string }[] = [];
  const personFiles = new Map<string, { id: string; name: string; size: number; bytes: Buffer; mimetype: string }>();

  const channelOf = (channel: string) => store.get(channel) ?? store.set(channel, []).get(channel)!;
  const findMessage = (channel: string, ts: string) => store.get(channel)?.find((m) => m.ts === ts && !m.deleted);
  const userName = (user: string) => users?.[user]?.name ?? (user === id.botUserId ? 'parlor' : user.toLowerCase());

  // ---- What the bot posts, and the events Slack sends it back about its own posts ----

  const botMessageEvent = (m: SlackMessage) => ({
    type: 'message',
    user: id.botUserId,
    ...(m.text !== undefined && { text: m.text }),
    ts: m.ts,
    bot_id: id.botId,
    app_id: id.appId,
    ...(m.blocks && { blocks: m.blocks }),
    ...(m.attachments && { attachments: m.attachments }),
    ...(m.files && { files: m.files.map(({ id: fileId, name, title, size }) => ({ id: fileId, name, title, size })), upload: true }),
    team: id.teamId,
    bot_profile: { id: id.botId, app_id: id.appId, name: 'parlor', deleted: false, team_id: id.teamId },
    ...(m.thread_ts && { thread_ts: m.thread_ts, parent_user_id: findMessage(m.channel, m.thread_ts)?.user }),
  });

  const echo = (event: Record<string, any>) => onBotEvent({ ...event, event_ts: event.ts, channel_type: channelTypeOf(event.channel) });

  /** A message as the history methods list it: the bot's as its event shows it, a person's with their user id. */
  const historyEntry = (m: SlackMessage, withMetadata: boolean) => ({
    ...(m.user === id.botUserId ? botMessageEvent(m) : { type: 'message', user: m.user, ts: m.ts, ...(m.text !== undefined && { text: m.text }), ...(m.thread_ts && { thread_ts: m.thread_ts }) }),
    ...(withMetadata && m.metadata && { metadata: m.metadata }),
  });

  function post(channel: string, fields: Partial<SlackMessage>): SlackMessage {
    const m: SlackMessage = { channel, ts: nextTs(), user: id.botUserId, bot_id: id.botId, reactions: [], edits: 0, deleted: false, ...fields, postedBlocks: fields.blocks };
    channelOf(channel).push(m);
    echo({ ...botMessageEvent(m), channel });
    return m;
  }

  function edit(m: SlackMessage, fields: Partial<SlackMessage>) {
    const previous = botMessageEvent(m);
    for (const [key, value] of Object.entries(fields)) if (value !== undefined) (m as any)[key] = value;
    m.edits++;
    const ts = nextTs();
    echo({ type: 'message', subtype: 'message_changed', message: { ...botMessageEvent(m), edited: { user: id.botUserId, ts } }, previous_message: previous, channel: m.channel, hidden: true, ts });
  }

  function remove(m: SlackMessage) {
    m.deleted = true;
    echo({ type: 'message', subtype: 'message_deleted', hidden: true, deleted_ts: m.ts, channel: m.channel, previous_message: botMessageEvent(m), ts: nextTs() });
  }

  /** The checks chat.postMessage and chat.update share: text length and Block Kit limits. */
  function contentProblem(body: Reply, requireContent: boolean): Reply | undefined {
    if (requireContent && !body.text && !body.blocks && !body.attachments) return fail('no_text');
    if (typeof body.text === 'string' && body.text.length > 40_000) return fail('msg_too_long');
    if (body.blocks !== undefined) {
      if (typeof body.blocks === 'string') return fail('invalid_blocks_format');
      const problems = blockProblems(body.blocks);
      if (problems.length) return fail('invalid_blocks', { errors: problems, response_metadata: { messages: problems.map((p) => `[ERROR] ${p}`) } });
    }
    return undefined;
  }

  const resolveChannel = (channel: unknown) => (isUserId(channel) ? imChannelFor([channel]) : isChannelId(channel) ? channel : undefined);
  const bool = (value: unknown) => (value === undefined ? undefined : value === true || value === 'true' || value === '1');

  const methods: Record<string, (body: Reply) => Reply> = {
    'auth.test': () => ({ ok: true, url: `https://${id.teamDomain}.slack.com/`, team: 'Parlor Test', user: 'parlor', team_id: id.teamId, user_id: id.botUserId, bot_id: id.botId, is_enterprise_install: false }),
    'chat.postMessage': (body) => {
      const channel = resolveChannel(body.channel);
      if (!channel) return fail('channel_not_found');
      const problem = contentProblem(body, true);
      if (problem) return problem;
      if (body.metadata !== undefined && (typeof body.metadata !== 'object' || typeof body.metadata.event_type !== 'string' || typeof body.metadata.event_payload !== 'object')) {
        return fail('invalid_metadata_format');
      }
      const m = post(channel, {
        text: body.text,
        blocks: body.blocks,
        attachments: body.attachments,
        mrkdwn: bool(body.mrkdwn) ?? true,
        thread_ts: body.thread_ts || undefined,
        ...(body.metadata && { metadata: body.metadata }),
      });
      return { ok: true, channel, ts: m.ts, message: botMessageEvent(m) };
    },
    'chat.update': (body) => {
      const m = isChannelId(body.channel) ? findMessage(body.channel, body.ts) : undefined;
      if (!m) return fail('message_not_found');
      if (m.user !== id.botUserId) return fail('cant_update_message');
      const problem = contentProblem(body, false);
      if (problem) return problem;
      // Fields left out keep their old value (Slack retains blocks and attachments that are not sent).
      edit(m, { text: body.text, blocks: body.blocks, attachments: body.attachments });
      return { ok: true, channel: m.channel, ts: m.ts, text: m.text ?? '', message: botMessageEvent(m) };
    },
    'chat.delete': (body) => {
      const m = isChannelId(body.channel) ? findMessage(body.channel, body.ts) : undefined;
      if (!m) return fail('message_not_found');
      if (m.user !== id.botUserId) return fail('cant_delete_message');
      remove(m);
      return { ok: true, channel: m.channel, ts: m.ts };
    },
    'chat.postEphemeral': (body) => {
      const channel = resolveChannel(body.channel);
      if (!channel) return fail('channel_not_found');
      if (!isUserId(body.user)) return fail('user_not_in_channel');
      const problem = contentProblem(body, true);
      if (problem) return problem;
      const message_ts = nextTs();
      ephemerals.push({ channel, user: body.user, message_ts, thread_ts: body.thread_ts || undefined, text: body.text, blocks: body.blocks });
      return { ok: true, message_ts };
    },
    'reactions.add': (body) => {
      const name = String(body.name ?? '');
      if (!/^[a-z0-9_+'-]+$/.test(name) || (emoji && !emoji.includes(name))) return fail('invalid_name');
      const m = isChannelId(body.channel) ? findMessage(body.channel, body.timestamp) : undefined;
      if (!m) return fail('message_not_found');
      if (m.reactions.includes(name)) return fail('already_reacted');
      m.reactions.push(name);
      return { ok: true };
    },
    'reactions.remove': (body) => {
      const m = isChannelId(body.channel) ? findMessage(body.channel, body.timestamp) : undefined;
      if (!m) return fail('message_not_found');
      if (!m.reactions.includes(body.name)) return fail('no_reaction');
      m.reactions = m.reactions.filter((r) => r !== body.name);
      return { ok: true };
    },
    'conversations.open': (body) => {
      const users = String(body.users ?? '').split(',').filter(Boolean);
      if (users.length === 0) return fail('users_list_not_supplied');
      if (!users.every(isUserId)) return fail('user_not_found');
      return { ok: true, channel: { id: imChannelFor(users) } };
    },
    // A channel's messages, newest first: top-level ones (a thread's replies only through conversations.replies).
    'conversations.history': (body) => {
      const channel = body.channel;
      if (!isChannelId(channel) || !store.has(channel)) return fail('channel_not_found');
      const limit = Math.min(Number(body.limit ?? 100) || 100, 999);
      const messages = store
        .get(channel)!
        .filter((m) => !m.deleted && (!m.thread_ts || m.thread_ts === m.ts) && (body.oldest === undefined || Number(m.ts) > Number(body.oldest)))
        .reverse();
      return { ok: true, ...page(messages, limit, body.cursor, (m) => historyEntry(m, bool(body.include_all_metadata) ?? false)) };
    },
    // A thread: its root, then its replies, oldest first.
    'conversations.replies': (body) => {
      const channel = body.channel;
      if (!isChannelId(channel) || !store.has(channel)) return fail('channel_not_found');
      const root = findMessage(channel, body.ts);
      if (!root) return fail('thread_not_found');
      const messages = store.get(channel)!.filter((m) => !m.deleted && (m.ts === root.ts || m.thread_ts === root.ts));
      return { ok: true, ...page(messages, Math.min(Number(body.limit ?? 1000) || 1000, 1000), body.cursor, (m) => historyEntry(m, bool(body.include_all_metadata) ?? false)) };
    },
    'conversations.info': (body) => {
      const channel = body.channel;
      if (!isChannelId(channel)) return fail('channel_not_found');
      const type = channelTypeOf(channel);
      const im = type === 'im';
      return {
        ok: true,
        channel: {
          id: channel,
          ...(!im && { name: channel.toLowerCase(), name_normalized: channel.toLowerCase() }),
          is_channel: type === 'channel',
          is_group: type === 'group',
          is_im: im,
          is_mpim: false,
          is_private: type !== 'channel',
          is_archived: false,
          is_member: true,
          created: 1700000000,
          ...(im && { user: `U${channel.slice(1)}`, is_user_deleted: false }),
        },
      };
    },
    'users.info': (body) => {
      const user = body.user;
      if (!isUserId(user)) return fail('user_not_found');
      const given = users?.[user] ?? {};
      const name = userName(user);
      const realName = given.real_name ?? name;
      return {
        ok: true,
        user: {
          id: user,
          team_id: id.teamId,
          name,
          deleted: false,
          real_name: realName,
          tz: given.tz ?? 'Europe/London',
          is_admin: false,
          is_bot: given.is_bot ?? user === id.botUserId,
          profile: { real_name: realName, display_name: given.display_name ?? name, real_name_normalized: realName, display_name_normalized: given.display_name ?? name, team: id.teamId },
        },
      };
    },
    'files.getUploadURLExternal': (body) => {
      const length = Number(body.length);
      if (!body.filename || !Number.isInteger(length) || length < 0) return fail('invalid_arguments');
      const fileId = slackId('F');
      uploads.set(fileId, { id: fileId, name: String(body.filename), size: length, uploaded: false });
      return { ok: true, upload_url: `${baseUrl()}/upload/v1/${fileId}`, file_id: fileId };
    },
    'files.completeUploadExternal': (body) => {
      const list: { id: string; title?: string }[] = Array.isArray(body.files) ? body.files : [];
      if (list.length === 0) return fail('invalid_arguments');
      const done = list.map((f) => uploads.get(f.id));
      if (done.some((f) => !f?.uploaded)) return fail('file_not_found');
      const files = done.map((f, i) => ({ id: f!.id, name: f!.name, title: list[i].title ?? f!.name, size: f!.size, bytes: f!.bytes }));
      const channel = resolveChannel(body.channel_id ?? body.channels);
      const share = channel ? post(channel, { text: body.initial_comment ?? '', files, thread_ts: body.thread_ts || undefined }) : undefined;
      const shares = share ? { [channelTypeOf(share.channel) === 'channel' ? 'public' : 'private']: { [share.channel]: [{ ts: share.ts, ...(share.thread_ts && { thread_ts: share.thread_ts }) }] } } : {};
      return { ok: true, files: files.map(({ id: fileId, name, title, size }) => ({ id: fileId, name, title, size, shares })) };
    },
    'files.info': (body) => {
      const file = personFiles.get(String(body.file ?? ''));
      if (!file) return fail('file_not_found');
      const { bytes: _bytes, ...fields } = file;
      return { ok: true, file: { ...fields, url_private: `${baseUrl()}/files-pri/${id.teamId}-${file.id}/${encodeURIComponent(file.name)}`, url_private_download: `${baseUrl()}/files-pri/${id.teamId}-${file.id}/download/${encodeURIComponent(file.name)}` } };
    },
    'assistant.threads.setStatus': (body) => {
      if (!isChannelId(body.channel_id) || !body.thread_ts) return fail('invalid_arguments');
      statuses.push({ channel: body.channel_id, thread_ts: body.thread_ts, status: String(body.status ?? '') });
      return { ok: true };
    },
  };

  function authorize(method: string, token: string | undefined): Reply | undefined {
    if (!token) return fail('not_authed');
    const wanted = APP_TOKEN_METHODS.has(method) ? id.appToken : id.botToken;
    if (token === wanted) return undefined;
    // The other kind of valid token: Slack says the token is of the wrong type, not that it is bad.
    return token === id.appToken || token === id.botToken ? fail('not_allowed_token_type') : fail('invalid_auth');
  }

  /** Keeps the bytes posted to an upload URL (one multipart file, as @slack/web-api sends it, or raw); their length. */
  function upload(fileId: string, body: Reply, raw: Buffer): number | undefined {
    const file = uploads.get(fileId);
    if (!file) return undefined;
    const part = Object.values(body).find((v) => v && typeof v === 'object' && Buffer.isBuffer(v.bytes));
    file.bytes = part ? (part.bytes as Buffer) : raw;
    file.uploaded = true;
    return file.bytes.length;
  }

  /** What a response_url does with a post: replace or delete the message, or add one; false for an unknown URL. */
  function respond(key: string, url: string, body: Reply): boolean {
    const target = responseUrls.get(key);
    if (!target) return false;
    responses.push({ url, body, at: Date.now() });
    const original = findMessage(target.channel, target.ts);
    if (body.delete_original && original) remove(original);
    else if (body.replace_original && original) edit(original, { text: body.text, blocks: body.blocks, attachments: body.attachments });
    else if (body.response_type === 'in_channel') post(target.channel, { text: body.text, blocks: body.blocks, thread_ts: body.thread_ts ?? target.thread_ts });
    else ephemerals.push({ channel: target.channel, user: target.user, message_ts: nextTs(), thread_ts: target.thread_ts, text: body.text, blocks: body.blocks });
    return true;
  }

  /** A file a person shares: files.info knows it, and its url_private_download serves its bytes to the bot token. */
  function personFile(file: { name: string; bytes: Buffer; mimetype?: string }) {
    const fileId = slackId('F');
    const stored = { id: fileId, name: file.name, size: file.bytes.length, bytes: file.bytes, mimetype: file.mimetype ?? 'application/octet-stream' };
    personFiles.set(fileId, stored);
    return {
      id: fileId,
      name: stored.name,
      title: stored.name,
      mimetype: stored.mimetype,
      filetype: stored.name.split('.').pop(),
      size: stored.size,
      mode: 'hosted',
      url_private: `${baseUrl()}/files-pri/${id.teamId}-${fileId}/${encodeURIComponent(stored.name)}`,
      url_private_download: `${baseUrl()}/files-pri/${id.teamId}-${fileId}/download/${encodeURIComponent(stored.name)}`,
    };
  }

  /** The bytes behind a url_private(_download) path, for the bot token only (Slack answers others with a login page). */
  function download(pathname: string, token: string | undefined): Buffer | undefined {
    const fileId = /^\/files-pri\/[^-/]+-([^/]+)\//.exec(pathname)?.[1];
    if (!fileId || token !== id.botToken) return undefined;
    return personFiles.get(fileId)?.bytes;
  }

  function userPost(fields: { user: string; channel: string; text: string; thread_ts?: string; files?: { name: string; bytes: Buffer; mimetype?: string }[] }) {
    const m: SlackMessage = { channel: fields.channel, ts: nextTs(), user: fields.user, text: fields.text, thread_ts: fields.thread_ts, reactions: [], edits: 0, deleted: false };
    const files = fields.files?.map(personFile);
    channelOf(fields.channel).push(m);
    const common = {
      user: m.user,
      text: m.text,
      ts: m.ts,
      team: id.teamId,
      client_msg_id: randomUUID(),
      blocks: richTextBlocks(fields.text),
      channel: m.channel,
      event_ts: m.ts,
      ...(m.thread_ts && { thread_ts: m.thread_ts, parent_user_id: findMessage(m.channel, m.thread_ts)?.user }),
      ...(files && { files, upload: false, subtype: 'file_share', display_as_bot: false }),
    };
    return { app_mention: { type: 'app_mention', ...common }, message: { type: 'message', ...common, channel_type: channelTypeOf(m.channel) } };
  }

  function blockActions(click: ClickSpec): Record<string, any> {
    const m = findMessage(click.message.channel, click.message.ts);
    if (!m) throw new Error(`fake-slack: no message ${click.message.ts} in ${click.message.channel} to click`);
    // A button gone from the message may still be on a screen that has not refreshed: a stale click.
    const found = findElement(m.blocks, click) ?? (click.stale ? findElement(m.postedBlocks, click) : undefined);
    if (!found) throw new Error(`fake-slack: message ${m.ts} has no button ${click.actionId ?? JSON.stringify(click.label)}`);
    const key = `${id.teamId}/${responseUrls.size + 1}/${slackId('', 24)}`;
    responseUrls.set(key, { channel: m.channel, ts: m.ts, user: click.user, thread_ts: m.thread_ts });
    const name = userName(click.user);
    return {
      type: 'block_actions',
      user: { id: click.user, username: name, name, team_id: id.teamId },
      api_app_id: id.appId,
      token: 'fake-verification-token',
      container: { type: 'message', message_ts: m.ts, channel_id: m.channel, is_ephemeral: false, ...(m.thread_ts && { thread_ts: m.thread_ts }) },
      trigger_id: `${Date.now()}.${slackId('', 8)}`,
      team: { id: id.teamId, domain: id.teamDomain },
      enterprise: null,
      is_enterprise_install: false,
      channel: { id: m.channel, name: channelTypeOf(m.channel) === 'im' ? 'directmessage' : m.channel.toLowerCase() },
      message: { ...botMessageEvent(m), type: 'message' },
      state: { values: {} },
      response_url: `${baseUrl()}/actions/${key}`,
      actions: [
        {
          action_id: found.element.action_id,
          block_id: found.block_id,
          text: found.element.text,
          value: click.value ?? found.element.value,
          ...(found.element.style && { style: found.element.style }),
          type: found.element.type ?? 'button',
          action_ts: nextTs(),
        },
      ],
    };
  }

  return {
    methods,
    authorize,
    upload,
    respond,
    userPost,
    download,
    blockActions,
    findMessage,
    ephemerals,
    responses,
    statuses,
    /** What the bot has in the channel now, oldest first: deletions dropped, edits applied. */
    messages: (channel: string) =>
      (store.get(channel) ?? [])
        .filter((m) => m.user === id.botUserId && !m.deleted)
        .map((m) => ({ ...m, reactions: [...m.reactions] }))
        .sort((a, b) => Number(a.ts) - Number(b.ts)),
    files: () => [...uploads.values()].filter((f) => f.uploaded).map(({ uploaded: _uploaded, ...file }) => file),
    reset() {
      for (const list of [ephemerals, responses, statuses]) list.length = 0;
      store.clear();
      uploads.clear();
    },
  };
}
