// The Discord connector's gateway: DMs (which discord.js drops without the Channel partial), a dropped connection
// resumed with nothing lost or doubled, a restart, and what start-up and doctor say when Discord refuses the token
// or the Message Content intent.
import { Client, Events, GatewayIntentBits, type Message } from 'discord.js';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { discordEntry } from '../../connectors/discord/entry.ts';
import { createDiscordConnector } from '../../connectors/discord/index.ts';
import { MESSAGE_CONTENT_REFUSED } from '../../connectors/discord/intents.ts';
import { ConfigError } from '../../src/config/errors.ts';
import type { InboundEvent } from '../../src/connector.ts';
import { createHeldEvents } from '../../src/ingress/held-events.ts';
import { Intent, startFakeDiscord } from '../support/fake-discord.ts';
import { until } from '../support/until.ts';
import { atNextReady, useDiscordHarness, storedEvents } from './discord-harness.ts';

const silent = pino({ level: 'silent' });
const getJson = async (url: string, headers: Record<string, string>) => (await fetch(url, { headers })).json();

const h = useDiscordHarness();

const botTexts = (channel: string) => h.fake.messages(channel).map((m) => m.content);

describe('Discord gateway', () => {
  it('answers a DM, which a discord.js client without the Channel partial receives and drops', async () => {
    // The control: discord.js as it is by default on the same fake, hearing the same DM.
    const bare = new Client({ intents: [GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent], rest: { api: h.fake.apiRoot } });
    const raw: string[] = [];
    const dropped: Message[] = [];
    bare.on(Events.Raw, (packet: { t: string; d: { content?: string } }) => void (packet.t === 'MESSAGE_CREATE' && raw.push(packet.d.content ?? '')));
    bare.on(Events.MessageCreate, (m) => void dropped.push(m));
    const ready = new Promise((resolve) => bare.once(Events.ClientReady, resolve));
    await bare.login(h.fake.token);
    await ready;
    try {
      h.fake.sendDm({ from: 'ana', content: 'are you there?' });
      const dm = h.fake.dmChannel('ana');
      await until(() => botTexts(dm).includes('echo: are you there?'), 'the answer to the DM');
      await until(() => raw.includes('are you there?'), 'the raw DM at the bare client');
      await new Promise((r) => setTimeout(r, 200));
      expect(dropped).toEqual([]);
      await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
      // The DM's conversation is the DM channel's.
      expect(h.conversation({ dm: 'ana' })).toBe(`dsc:discord:${dm}`);
    } finally {
      await bare.destroy();
    }
  });

  it('a dropped connection is resumed: what was sent meanwhile is answered once each, and an event sent twice is answered once', async () => {
    const identifies = h.fake.frames.filter((f) => f.direction === 'in' && f.op === 2).length;
    const mention = `<@${h.fake.bot.id}>`;
    const answered = () => ['ana', 'bo'].flatMap((p) => botTexts(h.fake.dmChannel(p))).concat(botTexts('team'), botTexts('open'));
    const before = answered().length;
    h.fake.disconnect();
    // One in each conversation (several in one would be read together by one turn).
    const whileAway = [
      h.fake.sendDm({ from: 'ana', content: 'one while away' }),
      h.fake.sendDm({ from: 'bo', content: 'two while away' }),
      h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `${mention} three while away` }),
      h.fake.sendGuildMessage({ channel: 'open', from: 'ana', content: 'four while away' }),
    ];
    await until(() => answered().length === before + 4, () => `four answers after the resume; there are ${JSON.stringify(answered().slice(before))}`);
    const conversations = [h.conversation({ dm: 'ana' }), h.conversation({ dm: 'bo' }), h.conversation({ channel: 'team' }), h.conversation({ channel: 'open' })];
    for (const id of conversations) await h.app.waitForIdle(id);
    const expected = ['one while away', 'two while away', 'three while away', 'four while away'];
    const replies = answered().slice(before);
    for (const text of expected) expect(replies.filter((r) => r.endsWith(text))).toHaveLength(1);
    // Resumed, not identified again.
    expect(h.fake.frames.filter((f) => f.direction === 'in' && f.op === 2)).toHaveLength(identifies);
    expect(h.fake.sessions()).toEqual([expect.objectContaining({ resumes: 1, connected: true })]);
    expect(h.connector.status?.()).toEqual({ state: 'up' });

    // Discord sends two of them again (the same events, the same ids), to this process and to a restarted one.
    const frameOf = (id: string) => h.fake.frames.find((f) => f.direction === 'out' && f.t === 'MESSAGE_CREATE' && f.d.id === id)!.d;
    h.fake.dispatch('MESSAGE_CREATE', frameOf(whileAway[0].id));
    await h.restartConnector();
    h.fake.dispatch('MESSAGE_CREATE', frameOf(whileAway[0].id));
    h.fake.dispatch('MESSAGE_CREATE', frameOf(whileAway[2].id));
    await new Promise((r) => setTimeout(r, 700));
    for (const id of conversations) await h.app.waitForIdle(id);
    expect(answered().slice(before)).toEqual(replies);
    expect(h.llm.requests).toHaveLength(4);
    const stored = await storedEvents(h);
    for (const message of whileAway) expect(stored.filter((id) => id === message.id)).toHaveLength(1);
  });

  it('a DM that comes while it connects (before discord.js is ready) is answered', async () => {
    // As soon as Discord has said READY to the new connection, Bo writes.
    const bo = atNextReady(h.fake, () => h.fake.sendDm({ from: 'bo', content: 'while you were connecting' }));
    try {
      await h.restartConnector();
    } finally {
      bo.restore();
    }
    expect(bo.fired()).toBe(true);
    await until(() => botTexts(h.fake.dmChannel('bo')).includes('echo: while you were connecting'), 'the answer');
    await h.app.waitForIdle(h.conversation({ dm: 'bo' }));
  });

  it('reconnects after Discord asks it to, and keeps answering', async () => {
    const [session] = h.fake.sessions();
    h.fake.requestReconnect();
    await until(() => h.fake.sessions()[0]?.resumes === session.resumes + 1 && h.fake.sessions()[0]?.connected, 'the resume');
    expect(h.fake.sessions().map((s) => s.id)).toEqual([session.id]);
    h.fake.sendDm({ from: 'bo', content: 'still there?' });
    await until(() => botTexts(h.fake.dmChannel('bo')).includes('echo: still there?'), 'the answer after the reconnect');
  });
});

describe('a Discord event the core cannot store at once', () => {
  it('is kept on disk while it is tried again (Discord never sends it again), and dropped from there once stored', async () => {
    const fake = await startFakeDiscord({ users: [{ username: 'cara', global_name: 'Cara' }] });
    const directory = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'discord-held-')), 'held-events');
    const held = createHeldEvents({ directory, log: silent });
    const connector = createDiscordConnector({ token: fake.token, apiUrl: fake.apiRoot, log: silent });
    const tries: { text?: string; onDisk: number }[] = [];
    try {
      await connector.start(async (event) => {
        tries.push({ text: event.text, onDisk: (await fs.readdir(directory).catch(() => [])).length });
        if (tries.length === 1) throw new Error('the database is away');
        return { status: 'queued' };
      }, held);
      fake.sendDm({ from: 'cara', content: 'kept, then stored' });
      await until(() => tries.length === 2, 'the second try');
      // The first try failed before anything was kept; the second ran with the event on disk.
      expect(tries).toEqual([{ text: 'kept, then stored', onDisk: 0 }, { text: 'kept, then stored', onDisk: 1 }]);
      await until(async () => (await fs.readdir(directory)).length === 0, 'the kept event dropped');
    } finally {
      await connector.stop();
      await fake.close();
      await fs.rm(path.dirname(directory), { recursive: true, force: true });
    }
  });
});

describe('Discord refusing the connector', () => {
  it('a refused Message Content intent (4014) stops start-up with the Developer Portal steps, as doctor says; without the intent it connects', async () => {
    const strict = await startFakeDiscord({ refuseIntents: Intent.MessageContent });
    const connector = createDiscordConnector({ token: strict.token, apiUrl: strict.apiRoot, messageContent: true, log: silent });
    try {
      const refused = await connector.start(async () => ({ status: 'ignored' })).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as Error).message).toBe(MESSAGE_CONTENT_REFUSED);
      expect((refused as Error).message).toMatch(/Developer Portal .*Bot → Privileged Gateway Intents.*Message Content Intent/);
      expect(strict.connections.map((c) => c.closed?.code)).toContain(4014);

      // doctor finds the same from the application's flags, without connecting.
      const settings = discordEntry.parse({ optional: (name) => ({ DISCORD_BOT_TOKEN: strict.token, DISCORD_API_URL: strict.apiRoot, DISCORD_MESSAGE_CONTENT: 'true' })[name], url: (name) => (name === 'DISCORD_API_URL' ? strict.apiRoot : undefined) })!;
      await expect(discordEntry.doctor(settings, getJson)).rejects.toThrow(MESSAGE_CONTENT_REFUSED);
      expect(await discordEntry.doctor({ ...settings, messageContent: undefined }, getJson)).toBe('bot parlor (mentions, replies and DMs only: DISCORD_MESSAGE_CONTENT is not set)');

      // Without asking for it, the bot connects, and a mention still carries its text.
      const events: InboundEvent[] = [];
      const plain = createDiscordConnector({ token: strict.token, apiUrl: strict.apiRoot, log: silent });
      await plain.start(async (event) => (events.push(event), { status: 'ignored' }));
      try {
        strict.sendGuildMessage({ channel: 'general', from: 'alice', content: 'no mention here' });
        strict.sendGuildMessage({ channel: 'general', from: 'alice', content: `<@${strict.bot.id}> hello` });
        strict.sendDm({ from: 'bob', content: 'a DM' });
        await until(() => events.length === 2, 'the mention and the DM');
        // Channels are handed over side by side: in any order.
        expect(events.map((e) => [e.chat.type, e.text, e.mentioned]).sort()).toEqual([
          ['dm', 'a DM', undefined],
          ['group', 'hello', true],
        ]);
        expect(strict.sessions()[0].intents & Intent.MessageContent).toBe(0);
      } finally {
        await plain.stop();
      }
    } finally {
      await connector.stop();
      await strict.close();
    }
  });

  it('a refused token stops start-up saying how to get a new one; doctor says the same', async () => {
    const fake = await startFakeDiscord();
    const connector = createDiscordConnector({ token: 'not-the-token', apiUrl: fake.apiRoot, log: silent });
    try {
      await expect(connector.start(async () => ({ status: 'ignored' }))).rejects.toThrow(/DISCORD_BOT_TOKEN was refused .*Reset Token/);
      await expect(discordEntry.doctor({ token: 'not-the-token', apiUrl: fake.apiRoot }, getJson)).rejects.toThrow(/token refused.*Reset Token/);
      expect(await discordEntry.doctor({ token: fake.token, apiUrl: `${fake.apiRoot}/v10`.replace(/\/v10$/, '') }, getJson)).toMatch(/^bot parlor/);
    } finally {
      await connector.stop();
      await fake.close();
    }
  });
});
