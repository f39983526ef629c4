// The fake Discord against the real discord.js Client: what a connector will see from it is what discord.js does.
import {
  ActionRowBuilder,
  ButtonBuilder,
  ButtonStyle,
  ChannelType,
  Client,
  DiscordAPIError,
  Events,
  GatewayIntentBits,
  MessageFlags,
  Partials,
  RESTEvents,
  Routes,
  type ClientEvents,
  type Interaction,
  type Message,
  type TextChannel,
} from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Intent, startFakeDiscord, type FakeDiscord } from './fake-discord.ts';

const INTENTS = [
  GatewayIntentBits.Guilds,
  GatewayIntentBits.GuildMessages,
  GatewayIntentBits.DirectMessages,
  GatewayIntentBits.MessageContent,
  GatewayIntentBits.GuildMessageReactions,
  GatewayIntentBits.DirectMessageReactions,
];
const PARTIALS = [Partials.Channel, Partials.Message, Partials.Reaction];

function clientFor(fake: FakeDiscord, partials = PARTIALS) {
  return new Client({ intents: INTENTS, partials, rest: { api: fake.apiRoot } });
}

/** The next `event` the client emits whose arguments pass `filter`. */
function next<K extends keyof ClientEvents>(client: Client, event: K, filter: (...args: ClientEvents[K]) => boolean = () => true, timeoutMs = 5000) {
  return new Promise<ClientEvents[K]>((resolve, reject) => {
    const timer = setTimeout(() => (client.off(event, listener), reject(new Error(`no ${String(event)} within ${timeoutMs} ms`))), timeoutMs);
    const listener = (...args: ClientEvents[K]) => {
      if (!filter(...args)) return;
      clearTimeout(timer);
      client.off(event, listener);
      resolve(args);
    };
    client.on(event, listener);
  });
}

function approvalRow(...ids: string[]) {
  return new ActionRowBuilder<ButtonBuilder>().addComponents(ids.map((id) => new ButtonBuilder().setCustomId(id).setLabel(id).setStyle(ButtonStyle.Primary)));
}

describe('fake Discord with the real discord.js Client', () => {
  let fake: FakeDiscord;
  let client: Client;
  let general: TextChannel;

  beforeAll(async () => {
    fake = await startFakeDiscord({ heartbeatIntervalMs: 500 });
    client = clientFor(fake);
    const ready = next(client, Events.ClientReady);
    await client.login(fake.token);
    await ready;
    general = client.channels.cache.get(fake.channel('general').id) as TextChannel;
  });

  afterAll(async () => {
    await client?.destroy();
    await fake?.close();
  });

  it('logs in: HELLO, IDENTIFY with the intents, READY with the guild unavailable, then GUILD_CREATE; heartbeats are acknowledged', async () => {
    expect(client.user?.id).toBe(fake.bot.id);
    expect(client.user?.bot).toBe(true);
    expect(client.application?.id).toBe(fake.application.id);
    const guild = client.guilds.cache.get(fake.guild().id)!;
    expect(guild.available).toBe(true);
    expect(guild.channels.cache.map((c) => c.name).sort()).toEqual(['Text Channels', 'general', 'open-question', 'support']);
    expect(guild.channels.cache.find((c) => c.name === 'open-question')?.parentId).toBe(fake.channel('support').id);
    expect(guild.roles.cache.map((r) => r.name).sort()).toEqual(['@everyone', 'moderators', 'parlor']);
    expect(general.type).toBe(ChannelType.GuildText);

    const wanted = Intent.Guilds | Intent.GuildMessages | Intent.DirectMessages | Intent.MessageContent | Intent.GuildMessageReactions | Intent.DirectMessageReactions;
    expect(fake.sessions()).toEqual([expect.objectContaining({ intents: wanted, connected: true })]);
    expect(fake.callsOf('GET /gateway/bot').map((c) => c.authorized)).toEqual([true]);
    expect(fake.connections[0].url).toBe('/?v=10&encoding=json');
    const out = fake.frames.filter((f) => f.direction === 'out').map((f) => f.t ?? f.op);
    expect(out.slice(0, 3)).toEqual([10, 'READY', 'GUILD_CREATE']);
    await fake.waitFor(() => fake.frames.some((f) => f.direction === 'out' && f.op === 11));
    expect(fake.frames.find((f) => f.direction === 'in' && f.op === 1)).toBeDefined();
  });

  it('answers GET /users/@me with the bot, and 401 to a wrong token', async () => {
    expect(await client.rest.get(Routes.user())).toMatchObject({ id: fake.bot.id, bot: true });
    const wrong = await fetch(`${fake.apiRoot}/v10/users/@me`, { headers: { authorization: 'Bot nope' } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ message: '401: Unauthorized', code: 0 });

    const stranger = new Client({ intents: INTENTS, rest: { api: fake.apiRoot } });
    await expect(stranger.login('not-the-token')).rejects.toMatchObject({ code: 'TokenInvalid' });
  });

  it('delivers a DM to messageCreate with Partials.Channel; without it discord.js drops the DM it received', async () => {
    const withoutPartial = clientFor(fake, [Partials.Message, Partials.Reaction]);
    const ready = next(withoutPartial, Events.ClientReady);
    await withoutPartial.login(fake.token);
    await ready;
    const raw: string[] = [];
    const dropped: Message[] = [];
    withoutPartial.on(Events.Raw, (packet: { t: string }) => void raw.push(packet.t));
    withoutPartial.on(Events.MessageCreate, (m) => void dropped.push(m));

    const received = next(client, Events.MessageCreate, (m) => m.content === 'hello from alice');
    const sent = fake.sendDm({ from: 'alice', content: 'hello from alice' });
    const [message] = await received;
    expect(sent).toMatchObject({ channel_id: fake.dmChannel('alice'), author: { username: 'alice' } });
    expect(message.guildId).toBeNull();
    expect(message.channel.type).toBe(ChannelType.DM);
    expect(message.author.id).toBe(fake.user('alice').id);

    await fake.waitFor(() => raw.includes('MESSAGE_CREATE'));
    await new Promise((r) => setTimeout(r, 100));
    expect(dropped).toEqual([]);
    await withoutPartial.destroy();
    await fake.waitFor(() => fake.sessions().length === 1);
  });

  it('a guild mention has the bot in mentions.users; @everyone and a role mention do not, though mentions.has() counts them', async () => {
    const [mention] = await Promise.all([
      next(client, Events.MessageCreate, (m) => m.content.endsWith('can you help?')).then(([m]) => m),
      fake.sendGuildMessage({ channel: 'general', from: 'bob', content: `<@${fake.bot.id}> can you help?` }),
    ]);
    expect(mention.mentions.users.has(fake.bot.id)).toBe(true);
    expect(mention.member?.id).toBe(fake.user('bob').id);
    expect(mention.guildId).toBe(fake.guild().id);

    const everyone = next(client, Events.MessageCreate, (m) => m.content.startsWith('@everyone'));
    fake.sendGuildMessage({ channel: 'general', from: 'bob', content: '@everyone standup' });
    const [all] = await everyone;
    expect(all.mentions.everyone).toBe(true);
    expect(all.mentions.users.has(fake.bot.id)).toBe(false);
    expect(all.mentions.has(client.user!)).toBe(true);
    expect(all.mentions.has(client.user!, { ignoreEveryone: true, ignoreRoles: true })).toBe(false);

    const botRole = fake.guild().botRoleId;
    const role = next(client, Events.MessageCreate, (m) => m.content.includes('role ping'));
    fake.sendGuildMessage({ channel: 'general', from: 'bob', content: `<@&${botRole}> role ping` });
    const [byRole] = await role;
    expect(byRole.mentions.roles.has(botRole)).toBe(true);
    expect(byRole.mentions.users.has(fake.bot.id)).toBe(false);
    expect(byRole.mentions.has(client.user!)).toBe(true);
    expect(byRole.mentions.has(client.user!, { ignoreRoles: true })).toBe(false);
  });

  it('a message in a thread arrives on the thread channel, and a reply references its parent message', async () => {
    const inThread = next(client, Events.MessageCreate, (m) => m.content === 'a thread question');
    fake.sendGuildMessage({ channel: 'support', thread: 'open-question', from: 'alice', content: 'a thread question' });
    const [threadMessage] = await inThread;
    expect(threadMessage.channel.isThread()).toBe(true);
    expect(threadMessage.channel.isThread() && threadMessage.channel.parentId).toBe(fake.channel('support').id);

    const started = next(client, Events.ThreadCreate, (t) => t.name === 'new-topic');
    const firstInNew = next(client, Events.MessageCreate, (m) => m.content === 'first in a new thread');
    fake.sendGuildMessage({ channel: 'support', thread: 'new-topic', from: 'alice', content: 'first in a new thread' });
    const [[thread, newlyCreated], [first]] = await Promise.all([started, firstInNew]);
    expect(newlyCreated).toBe(true);
    expect(first.channelId).toBe(thread.id);

    const reply = next(client, Events.MessageCreate, (m) => m.content === 'replying');
    fake.sendGuildMessage({ channel: 'support', thread: 'new-topic', from: 'bob', content: 'replying', message_reference: first.id });
    const [answer] = await reply;
    expect(answer.reference?.messageId).toBe(first.id);
    expect(answer.mentions.repliedUser?.id).toBe(fake.user('alice').id);
  });

  it('channel.send with a button is recorded, and comes back over the gateway as the bot’s own messageCreate', async () => {
    const echoed = next(client, Events.MessageCreate, (m) => m.author.id === fake.bot.id && m.content === 'Run the step?');
    const sent = await general.send({ content: 'Run the step?', components: [approvalRow('approve:1', 'deny:1')], allowedMentions: { parse: [] } });
    await echoed;
    const [call] = fake.callsOf(`POST /channels/${general.id}/messages`).filter((c) => c.body.content === 'Run the step?');
    expect(call).toMatchObject({ status: 200, authorized: true, body: { allowed_mentions: { parse: [] } } });
    const posted = fake.messages('general').find((m) => m.id === sent.id)!;
    expect(posted.components[0].components.map((b: { custom_id: string }) => b.custom_id)).toEqual(['approve:1', 'deny:1']);
    expect(posted.author.id).toBe(fake.bot.id);
    expect(BigInt(posted.id) > 0n && Date.parse(posted.timestamp)).toBeGreaterThan(0);
  });

  it('a click reaches interactionCreate; an ephemeral reply and deferUpdate reach the fake as 204 callbacks; editReply edits the clicked message', async () => {
    const question = await general.send({ content: 'Approve?', components: [approvalRow('ok:2', 'no:2', 'later:2', 'shown:2')] });
    let shownId: string | undefined;
    const answer = async (interaction: Interaction) => {
      if (!interaction.isButton()) return;
      if (interaction.customId === 'no:2') await interaction.reply({ content: 'Only approvers can answer.', flags: MessageFlags.Ephemeral });
      if (interaction.customId === 'ok:2') {
        await interaction.deferUpdate();
        await interaction.editReply({ content: 'Approved by Alice.', components: [] });
      }
      if (interaction.customId === 'later:2') {
        await interaction.deferReply();
        await interaction.followUp('Done later.');
      }
      if (interaction.customId === 'shown:2') shownId = (await interaction.reply({ content: 'Shown.', withResponse: true })).resource?.message?.id;
    };
    client.on(Events.InteractionCreate, answer);

    const refused = await fake.click({ message: question.id, customId: 'no:2', from: 'bob' });
    expect(refused).toMatchObject({ type: 4, data: { content: 'Only approvers can answer.', flags: MessageFlags.Ephemeral } });
    expect(refused.latencyMs).toBeLessThan(3000);
    const ephemeral = fake.messages('general').find((m) => m.content === 'Only approvers can answer.')!;
    expect(ephemeral.flags & MessageFlags.Ephemeral).toBe(MessageFlags.Ephemeral);
    expect(ephemeral.interaction_metadata.user.id).toBe(fake.user('bob').id);

    // A deferred reply shows "thinking…" (flag 128) until the first follow-up fills it in.
    expect((await fake.click({ message: question.id, customId: 'later:2', from: 'alice' })).type).toBe(5);
    const done = await fake.waitFor(() => fake.messages('general').find((m) => m.content === 'Done later.'));
    expect(done.flags & MessageFlags.Loading).toBe(0);
    expect(fake.messages('general').filter((m) => m.interaction_metadata?.id === fake.interactions.at(-1)!.id)).toHaveLength(1);
    expect(fake.callsOf('POST /webhooks/:app/:token').map((c) => [c.query.wait, c.authorized])).toEqual([['true', false]]);
    // with_response=true: 200 with the callback resource instead of 204.
    await fake.click({ message: question.id, customId: 'shown:2', from: 'alice' });
    await fake.waitFor(() => shownId);
    expect(fake.message(shownId!)?.content).toBe('Shown.');

    const approved = await fake.click({ message: question.id, customId: 'ok:2', from: 'alice' });
    expect(approved.type).toBe(6);
    await fake.waitFor(() => fake.message(question.id)?.content === 'Approved by Alice.');
    expect(fake.message(question.id)?.components).toEqual([]);
    expect(fake.callsOf('POST /interactions/:id/:token/callback').map((c) => [c.body.type, c.status, c.authorized])).toEqual([
      [4, 204, false],
      [5, 204, false],
      [4, 200, false],
      [6, 204, false],
    ]);
    expect(fake.callsOf('PATCH /webhooks/:app/:token/messages/@original')).toHaveLength(1);
    expect(() => fake.click({ message: question.id, customId: 'ok:2', from: 'alice' })).toThrow(/no enabled component/);

    // The raw answer: 204, no body, no content type; a second answer is refused.
    const raw = await general.send({ content: 'raw', components: [approvalRow('raw:3')] });
    const clicked = fake.click({ message: raw.id, customId: 'raw:3', from: 'alice' });
    const interaction = await fake.waitFor(() => fake.interactions.find((i) => i.customId === 'raw:3'));
    const callback = `${fake.apiRoot}/v10/interactions/${interaction.id}/${interaction.token}/callback`;
    const post = () => fetch(callback, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 6 }) });
    const first = await post();
    expect([first.status, first.headers.get('content-type'), await first.text()]).toEqual([204, null, '']);
    await clicked;
    const again = await post();
    expect([again.status, await again.json()]).toEqual([400, { message: 'Interaction has already been acknowledged.', code: 40060 }]);
    client.off(Events.InteractionCreate, answer);
  });

  it('a scripted 429 on message create is waited out by discord.js and the message is created once', async () => {
    const limited: unknown[] = [];
    const onLimit = (info: unknown) => void limited.push(info);
    client.rest.on(RESTEvents.RateLimited, onLimit);
    fake.failNext('POST /channels/:id/messages', { status: 429, body: { message: 'You are being rate limited.', retry_after: 0.3, global: false } });
    const started = Date.now();
    await general.send('after the limit');
    client.rest.off(RESTEvents.RateLimited, onLimit);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    const attempts = fake.callsOf('POST /channels/:id/messages').filter((c) => c.body.content === 'after the limit');
    expect(attempts.map((c) => c.status)).toEqual([429, 200]);
    expect(fake.messages('general').filter((m) => m.content === 'after the limit')).toHaveLength(1);
    expect(limited).toEqual([expect.objectContaining({ route: '/channels/:id/messages', majorParameter: general.id, global: false })]);
  });

  it('a 5xx is retried: once when Discord did nothing, twice over when it had already created the message; enforce_nonce dedupes', async () => {
    fake.failNext('POST /channels/:id/messages', { status: 502 });
    await general.send('after a 502');
    expect(fake.messages('general').filter((m) => m.content === 'after a 502')).toHaveLength(1);

    fake.failNext('POST /channels/:id/messages', { reset: true });
    await general.send('after a connection reset');
    expect(fake.callsOf('POST /channels/:id/messages').filter((c) => c.body.content === 'after a connection reset').map((c) => c.status)).toEqual([undefined, 200]);

    fake.failNext('POST /channels/:id/messages', { status: 500, applied: true });
    await general.send('created, then a 500');
    expect(fake.messages('general').filter((m) => m.content === 'created, then a 500')).toHaveLength(2);

    fake.failNext('POST /channels/:id/messages', { status: 500, applied: true });
    await general.send({ content: 'with a nonce', nonce: '1234567890', enforceNonce: true });
    expect(fake.messages('general').filter((m) => m.content === 'with a nonce')).toHaveLength(1);

    await expect(general.send('x'.repeat(2001))).rejects.toMatchObject({ code: 50035, status: 400 });
  });

  it('typing, reactions both ways, threads, DMs and attachments', async () => {
    await general.sendTyping();
    expect(fake.callsOf(`POST /channels/${general.id}/typing`)).toHaveLength(1);

    const note = await general.send({ content: 'a file', files: [{ attachment: Buffer.from('hello world'), name: 'note.txt' }] });
    const [upload] = fake.callsOf('POST /channels/:id/messages').filter((c) => c.body.content === 'a file');
    expect(upload.files).toEqual([expect.objectContaining({ field: 'files[0]', name: 'note.txt', size: 11 })]);
    const stored = fake.message(note.id)!;
    expect(stored.attachments).toEqual([expect.objectContaining({ filename: 'note.txt', size: 11 })]);
    expect(await (await fetch(stored.attachments[0].url)).text()).toBe('hello world');

    await note.react('✅');
    expect(fake.callsOf(`PUT /channels/${general.id}/messages/${note.id}/reactions/:emoji/@me`).map((c) => decodeURIComponent(c.path.split('/')[6]))).toEqual(['✅']);
    const reacted = next(client, Events.MessageReactionAdd, (_r, user) => user.id === fake.user('alice').id);
    fake.react({ message: note.id, from: 'alice', emoji: '👍' });
    const [reaction, user] = await reacted;
    expect([reaction.emoji.name, reaction.message.id, user.id]).toEqual(['👍', note.id, fake.user('alice').id]);
    expect(fake.message(note.id)?.reactions.map((r: { emoji: { name: string }; count: number }) => [r.emoji.name, r.count])).toEqual([
      ['✅', 1],
      ['👍', 1],
    ]);

    const question = next(client, Events.MessageCreate, (m) => m.content === 'start a thread here');
    fake.sendGuildMessage({ channel: 'general', from: 'bob', content: 'start a thread here' });
    const [asked] = await question;
    const thread = await asked.startThread({ name: 'about this' });
    expect(thread.id).toBe(asked.id);
    await thread.send('in the thread');
    expect(fake.messages(thread.id).map((m) => m.content)).toEqual(['in the thread']);
    expect(fake.messages('general').some((m) => m.content === 'in the thread')).toBe(false);
    await expect(asked.startThread({ name: 'twice' })).rejects.toMatchObject({ code: 160004 });
    const standalone = await general.threads.create({ name: 'standalone' });
    expect(fake.channel('standalone')).toMatchObject({ id: standalone.id, parent_id: general.id, type: ChannelType.PublicThread });

    // Alice's DM channel is cached since she wrote; Bob's is opened first.
    await (await client.users.fetch(fake.user('alice').id)).send('a DM to alice');
    await (await client.users.fetch(fake.user('bob').id)).send('a DM to bob');
    expect(fake.callsOf('POST /users/@me/channels').map((c) => c.body)).toEqual([{ recipient_id: fake.user('bob').id }]);
    expect(fake.messages(fake.dmChannel('alice')).map((m) => m.content)).toEqual(['a DM to alice']);
    expect(fake.messages(fake.dmChannel('bob')).map((m) => m.content)).toEqual(['a DM to bob']);

    const withFile = next(client, Events.MessageCreate, (m) => m.content === 'see attached');
    fake.sendDm({ from: 'alice', content: 'see attached', attachments: [{ name: 'photo.png', bytes: Buffer.from([1, 2, 3]), contentType: 'image/png' }] });
    const [dm] = await withFile;
    const file = dm.attachments.first()!;
    expect([file.name, file.size, file.contentType]).toEqual(['photo.png', 3, 'image/png']);
    expect(Buffer.from(await (await fetch(file.url)).arrayBuffer())).toEqual(Buffer.from([1, 2, 3]));
  });

  it('a dropped gateway connection is resumed on resume_gateway_url, and an event sent meanwhile is replayed', async () => {
    const identifies = fake.frames.filter((f) => f.direction === 'in' && f.op === 2).length;
    const connections = fake.connections.length;
    const resumed = next(client, Events.ShardResume);
    const missed = next(client, Events.MessageCreate, (m) => m.content === 'sent while you were away');
    fake.disconnect();
    fake.sendDm({ from: 'alice', content: 'sent while you were away' });
    await Promise.all([resumed, missed]);
    expect(fake.connections.length).toBe(connections + 1);
    expect(fake.connections.at(-1)!.url).toBe('/resume?v=10&encoding=json');
    expect(fake.frames.filter((f) => f.direction === 'in' && f.op === 2)).toHaveLength(identifies);
    expect(fake.frames.filter((f) => f.direction === 'in' && f.op === 6)).toHaveLength(1);
    expect(fake.sessions()).toEqual([expect.objectContaining({ resumes: 1, connected: true })]);

    // Close code 4000 (unknown error) is resumable too.
    const again = next(client, Events.ShardResume);
    fake.closeWith(4000);
    await again;
    expect(fake.sessions()).toEqual([expect.objectContaining({ resumes: 2, connected: true })]);
  });

  it('without MESSAGE_CONTENT a guild message arrives empty unless it mentions the bot; a DM keeps its content', async () => {
    const other = await startFakeDiscord();
    const limited = new Client({ intents: INTENTS.filter((i) => i !== GatewayIntentBits.MessageContent), partials: PARTIALS, rest: { api: other.apiRoot } });
    try {
      const ready = next(limited, Events.ClientReady);
      await limited.login(other.token);
      await ready;
      const seen: Message[] = [];
      limited.on(Events.MessageCreate, (m) => void seen.push(m));
      other.sendGuildMessage({ channel: 'general', from: 'alice', content: 'just chatting' });
      other.sendGuildMessage({ channel: 'general', from: 'alice', content: `<@${other.bot.id}> hi` });
      other.sendDm({ from: 'alice', content: 'a private word' });
      await other.waitFor(() => seen.length === 3);
      expect(seen.map((m) => m.content)).toEqual(['', `<@${other.bot.id}> hi`, 'a private word']);
    } finally {
      await limited.destroy();
      await other.close();
    }
  });

  it('a refused privileged intent closes the gateway with 4014, and discord.js reports it and rejects login', async () => {
    const strict = await startFakeDiscord({ refuseIntents: Intent.MessageContent });
    const refused = clientFor(strict);
    try {
      const disconnected = next(refused, Events.ShardDisconnect);
      const shardError = next(refused, Events.ShardError);
      await expect(refused.login(strict.token)).rejects.toThrow(/disallowed intents/i);
      const [[event], [error]] = await Promise.all([disconnected, shardError]);
      expect(event.code).toBe(4014);
      expect(error.message).toMatch(/disallowed intents/i);
      expect(strict.connections[0].closed).toEqual({ by: 'server', code: 4014 });
      expect(strict.sessions()).toEqual([]);
      expect(strict.application.flags & (1 << 19)).toBe(0);
    } finally {
      await refused.destroy();
      await strict.close();
    }
  });

  it('rejects an interaction answered after the 3 s window with 10062, which discord.js throws', async () => {
    const slow = await startFakeDiscord({ interactionWindowMs: 150 });
    const bot = clientFor(slow);
    try {
      const ready = next(bot, Events.ClientReady);
      await bot.login(slow.token);
      await ready;
      const channel = bot.channels.cache.get(slow.channel('general').id) as TextChannel;
      const asked = await channel.send({ content: 'Late?', components: [approvalRow('late')] });
      const failure = new Promise<unknown>((resolve) => {
        bot.on(Events.InteractionCreate, async (interaction) => {
          await new Promise((r) => setTimeout(r, 300));
          if (interaction.isButton()) await interaction.deferUpdate().then(resolve, resolve);
        });
      });
      await expect(slow.click({ message: asked.id, customId: 'late', from: 'alice' })).rejects.toThrow(/not answered within 150 ms/);
      const error = await failure;
      expect(error).toBeInstanceOf(DiscordAPIError);
      expect(error).toMatchObject({ code: 10062, status: 404 });
    } finally {
      await bot.destroy();
      await slow.close();
    }
  });
});
