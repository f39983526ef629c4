// What the Discord connector sends: Markdown as Discord renders it, mentions that never ping everyone or a role,
// 2000-character parts with the reply reference on the first only, a 429 waited out once, files as attachments,
// reactions (Unicode and a server's own emoji, both ways), typing, and a DM opened for a person named by user id.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { componentsFor } from '../../connectors/discord/components.ts';
import { formatForDiscord, plainForDiscord, toDiscordMarkdown } from '../../connectors/discord/format.ts';
import pino from 'pino';
import { createDiscordSending, reactionEmoji } from '../../connectors/discord/send.ts';
import { PlatformError } from '../../src/connector.ts';
import { until } from '../support/until.ts';
import { useDiscordHarness } from './discord-harness.ts';

describe('Discord Markdown', () => {
  it('passes what Discord renders through, and rewrites tables, headings deeper than ###, and images', () => {
    const source = [
      '## Plan',
      '#### Details',
      'Some **bold**, _italic_, `code` and a [link](https://example.com) ![chart](https://example.com/c.png) ![](https://example.com/d.png).',
      '',
      '| name | size |',
      '|------|-----:|',
      '| a | 1 |',
      '| bbb | 22 |',
      '',
      '```md',
      '#### kept | as | written ![x](y)',
      '```',
      'and `![inline](code)` stays.',
    ].join('\n');
    expect(toDiscordMarkdown(source)).toBe(
      [
        '## Plan',
        '**Details**',
        'Some **bold**, _italic_, `code` and a [link](https://example.com) [chart](https://example.com/c.png) https://example.com/d.png.',
        '',
        '```',
        'name | size',
        '-----+-----',
        'a    | 1',
        'bbb  | 22',
        '```',
        '',
        '```md',
        '#### kept | as | written ![x](y)',
        '```',
        'and `![inline](code)` stays.',
      ].join('\n'),
    );
  });

  it('splits under 2000 characters, code fences closed and reopened, nothing lost; plain text is escaped', () => {
    const code = Array.from({ length: 120 }, (_, i) => `line ${i} of the code block`).join('\n');
    const parts = formatForDiscord(`Intro.\n\n\`\`\`ts\n${code}\n\`\`\`\n\nOutro.`);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      expect([...part].length).toBeLessThanOrEqual(2000);
      expect((part.match(/^```/gm) ?? []).length % 2).toBe(0);
    }
    expect(parts.join('\n').replace(/```(ts)?\n/g, '')).toContain('line 119 of the code block');
    expect(plainForDiscord('**Bold** and `code`')).toEqual(['\\*\\*Bold\\*\\* and \\`code\\`']);
  });

  it('lays buttons out in rows of five, at most five rows, and past 25 choices offers select menus', () => {
    const buttons = (n: number) => Array.from({ length: n }, (_, i) => ({ label: `Choice ${i}`, data: `q:abc:${i}` }));
    expect(componentsFor([buttons(3)]).map((r) => r.components.map((c) => c.custom_id))).toEqual([['q:abc:0', 'q:abc:1', 'q:abc:2']]);
    expect(componentsFor([buttons(7)]).map((r) => r.components.length)).toEqual([5, 2]);
    const menus = componentsFor([buttons(30)]);
    expect(menus.map((r) => [r.components[0].type, (r.components[0].options as unknown[]).length])).toEqual([
      [3, 25],
      [3, 5],
    ]);
    expect(() => componentsFor([[{ label: 'x', data: `q:${'a'.repeat(99)}:1` }]])).toThrow(/100-character custom_id/);
  });

  it('reads a server\'s own emoji in any of the ways it is written', () => {
    expect(['<:party:112233445566778899>', '<a:party:112233445566778899>', 'party:112233445566778899', '👍'].map(reactionEmoji)).toEqual([
      'party:112233445566778899',
      'party:112233445566778899',
      'party:112233445566778899',
      '👍',
    ]);
  });
});

const h = useDiscordHarness();

const botMessages = (channel: string) => h.fake.messages(channel);

describe('Discord sending between gateway sessions', () => {
  it('a message to a chat it has not looked up yet is refused as "not connected yet", retryable, not with a TypeError', async () => {
    const notConnected = () => {
      throw new PlatformError({ platform: 'discord', method: 'rest', retryable: true, message: 'not connected yet' });
    };
    const sending = createDiscordSending({ client: () => undefined, rest: notConnected, channels: new Set(), log: pino({ level: 'silent' }) });
    const err = await sending.send({ chat: '123456789012345678', text: 'hello' }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(PlatformError);
    expect(err).toMatchObject({ retryable: true, message: 'discord getChannel: not connected yet' });
  });
});

describe('Discord sending', () => {
  it('never pings @everyone, @here or a role from model text, though it may name a person', async () => {
    const ana = h.fake.user('ana').id;
    h.llm.script({ text: `@everyone and @here, <@&${h.fake.guild().botRoleId}> and <@&${h.fake.guild().roles[1].id}>: <@${ana}> says hi` });
    const asked = h.fake.sendGuildMessage({ channel: 'open', from: 'bo', content: 'ping them all' });
    const reply = await until(() => botMessages('open').find((m) => m.content.includes('says hi')), 'the reply');
    await h.app.waitForIdle(h.conversation({ channel: 'open' }));
    expect(reply.mention_everyone).toBe(false);
    expect(reply.mention_roles).toEqual([]);
    // The person named, and the author of the message it replies to.
    expect(reply.mentions.map((u: { id: string }) => u.id).sort()).toEqual([ana, h.fake.user('bo').id].sort());
    expect(reply.message_reference?.message_id).toBe(asked.id);
    const [call] = h.fake.callsOf(`POST /channels/${h.fake.channel('open').id}/messages`).filter((c) => c.body.content?.includes('says hi'));
    expect(call.body.allowed_mentions).toEqual({ parse: ['users'], replied_user: true });
  });

  it('splits a long answer at 2000 characters: the reply reference on the first part only, the buttons under the last', async () => {
    const asked = h.fake.sendGuildMessage({ channel: 'open', from: 'ana', content: 'tell me everything' });
    await until(() => botMessages('open').find((m) => m.content.endsWith('tell me everything')), 'the echo');
    await h.app.waitForIdle(h.conversation({ channel: 'open' }));
    const text = Array.from({ length: 60 }, (_, i) => `Point ${i}: ${'details '.repeat(12).trim()}.`).join('\n\n');
    const sent = await h.connector.send({ chat: h.fake.channel('open').id, text, replyTo: asked.id, buttons: [[{ label: 'More', data: 'q:abc123:1' }]] });
    const parts = sent.ids.map((id) => h.fake.message(id)!);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) expect([...part.content].length).toBeLessThanOrEqual(2000);
    expect(parts.map((p) => p.message_reference?.message_id)).toEqual([asked.id, ...parts.slice(1).map(() => undefined)]);
    expect(parts.map((p) => p.components.length)).toEqual([...parts.slice(1).map(() => 0), 1]);
    expect(parts.map((p) => p.content).join('\n\n')).toBe(text);
  });

  it('waits out a 429 from Discord once, and the message is created once', async () => {
    const dm = h.fake.dmChannel('ana');
    h.fake.failNext(`POST /channels/${dm}/messages`, { status: 429, body: { message: 'You are being rate limited.', retry_after: 0.4, global: false } });
    const started = Date.now();
    h.fake.sendDm({ from: 'ana', content: 'after a rate limit' });
    await until(() => botMessages(dm).find((m) => m.content === 'echo: after a rate limit'), 'the answer');
    const attempts = h.fake.callsOf(`POST /channels/${dm}/messages`).filter((c) => c.body.content === 'echo: after a rate limit');
    expect(attempts.map((c) => c.status)).toEqual([429, 200]);
    expect(attempts[1].at - attempts[0].at).toBeGreaterThanOrEqual(350);
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    expect(botMessages(dm).filter((m) => m.content === 'echo: after a rate limit')).toHaveLength(1);
    await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
  });

  it('a message sent again under the same key (a resend after a crash) is the one Discord created, not a second', async () => {
    const dm = h.fake.dmChannel('ana');
    const text = Array.from({ length: 30 }, (_, i) => `Line ${i}: ${'words '.repeat(15).trim()}.`).join('\n\n');
    const first = await h.connector.send({ chat: dm, text, key: 'outbound:4242' });
    expect(first.ids.length).toBeGreaterThanOrEqual(2);
    // The process died before it could record it as sent; the next one sends it again.
    const again = await h.connector.send({ chat: dm, text, key: 'outbound:4242' });
    expect(again.ids).toEqual(first.ids);
    expect(botMessages(dm).filter((m) => m.content.startsWith('Line 0:'))).toHaveLength(1);
    // Another message with the same text is another message.
    const other = await h.connector.send({ chat: dm, text, key: 'outbound:4243' });
    expect(other.ids.some((id) => first.ids.includes(id))).toBe(false);
  });

  it('sends files as attachments, the text with the first ten, the rest after', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-discord-files-'));
    try {
      const files = await Promise.all(
        Array.from({ length: 11 }, async (_, i) => {
          const file = path.join(dir, `report-${i}.txt`);
          await fs.writeFile(file, `report number ${i}`);
          return file;
        }),
      );
      const dm = h.fake.dmChannel('ana');
      const sent = await h.connector.send({ chat: dm, text: 'Here are the **reports**.', files });
      expect(sent.ids).toHaveLength(2);
      const [first, second] = sent.ids.map((id) => h.fake.message(id)!);
      expect(first.content).toBe('Here are the **reports**.');
      expect(first.attachments.map((a: { filename: string }) => a.filename)).toEqual(files.slice(0, 10).map((f) => path.basename(f)));
      expect(second.attachments.map((a: { filename: string }) => a.filename)).toEqual(['report-10.txt']);
      expect(await (await fetch(first.attachments[3].url)).text()).toBe('report number 3');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it("sends files when another undici set the process's default dispatcher first (Slack's Socket Mode loads undici 7)", async () => {
    // Whichever undici loads first in a process sets the default dispatcher every version shares; discord.js builds
    // its uploads with its own, which another version's dispatcher cannot write ("action is not a function").
    const shared = Symbol.for('undici.globalDispatcher.1');
    const globals = globalThis as Record<symbol, unknown>;
    const before = globals[shared];
    const { Agent } = await import('undici');
    globals[shared] = new Agent();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-discord-files-'));
    try {
      const file = path.join(dir, 'notes.txt');
      await fs.writeFile(file, 'the notes');
      const sent = await h.connector.send({ chat: h.fake.dmChannel('ana'), text: 'the notes', files: [file] });
      const message = h.fake.message(sent.ids[0])!;
      expect(message.attachments.map((a: { filename: string }) => a.filename)).toEqual(['notes.txt']);
    } finally {
      await (globals[shared] as { close(): Promise<void> }).close();
      globals[shared] = before;
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('sets reactions with Unicode and a server\'s own emoji, in a thread too', async () => {
    const asked = h.fake.sendGuildMessage({ channel: 'open', from: 'ana', content: 'react to this' });
    await until(() => botMessages('open').find((m) => m.content.endsWith('react to this')), 'the echo');
    await h.app.waitForIdle(h.conversation({ channel: 'open' }));
    const open = h.fake.channel('open').id;
    await h.connector.react!(open, asked.id, '👍');
    await h.connector.react!(open, asked.id, '<:party:112233445566778899>');
    expect(h.fake.callsOf(`PUT /channels/${open}/messages/${asked.id}/reactions/:emoji/@me`).map((c) => decodeURIComponent(c.path.split('/')[6]))).toEqual([
      '👍',
      'party:112233445566778899',
    ]);
    expect(h.fake.message(asked.id)!.reactions.map((r: { emoji: { name: string; id: string | null }; me: boolean }) => [r.emoji.name, r.emoji.id, r.me])).toEqual([
      ['👍', null, true],
      ['party', '112233445566778899', true],
    ]);

    // The model reacts to a message in a thread: the reaction lands on it, in the thread's channel.
    h.llm.script({ toolCalls: [{ name: 'react', arguments: { emoji: '🎉' } }] }, { text: 'done' });
    const inThread = h.fake.sendGuildMessage({ channel: 'open', thread: 'reactions', from: 'ana', content: 'celebrate this' });
    const thread = h.fake.channel('reactions').id;
    // `react` needs approval for this persona: Ana allows it.
    const question = await until(() => botMessages(thread).find((m) => m.components.length > 0), 'the approval in the thread');
    await h.fake.click({ message: question.id, customId: question.components[0].components[0].custom_id, from: 'ana' });
    await until(() => botMessages(thread).find((m) => m.content === 'done'), 'the answer in the thread');
    expect(h.fake.message(inThread.id)!.reactions?.map((r: { emoji: { name: string } }) => r.emoji.name)).toEqual(['🎉']);
    await h.app.waitForIdle(h.conversation({ channel: 'open', thread: 'reactions' }));
  });

  it('records reactions people add to its messages, a server\'s own emoji by its name, for the next turn', async () => {
    const dm = h.fake.dmChannel('bo');
    h.fake.sendDm({ from: 'bo', content: 'here is my plan' });
    const answer = await until(() => botMessages(dm).find((m) => m.content === 'echo: here is my plan'), 'the answer');
    await h.app.waitForIdle(h.conversation({ dm: 'bo' }));
    h.fake.react({ message: answer.id, from: 'bo', emoji: '🔥' });
    h.fake.react({ message: answer.id, from: 'bo', emoji: 'party_parrot:223344556677889900' });
    const asked = h.fake.sendDm({ from: 'bo', content: 'so?' });
    h.fake.react({ message: asked.id, from: 'bo', emoji: '👎' });
    await until(() => h.llm.requests.length === 2, 'the next turn');
    const contents = h.llm.requests[1].body.messages.map((m: { content: string }) => m.content);
    expect(contents).toContain('[Bo reacted 🔥 to your message "echo: here is my plan"]');
    expect(contents).toContain('[Bo reacted :party_parrot: to your message "echo: here is my plan"]');
    expect(contents.join('\n')).not.toContain('👎');
    await h.app.waitForIdle(h.conversation({ dm: 'bo' }));
  });

  it('shows typing while a turn runs', async () => {
    h.llm.script({ text: 'done thinking', delayMs: 300 });
    const dm = h.fake.dmChannel('ana');
    const from = h.fake.calls.length;
    h.fake.sendDm({ from: 'ana', content: 'think a little' });
    await until(() => botMessages(dm).find((m) => m.content === 'done thinking'), 'the answer');
    const calls = h.fake.calls.slice(from);
    const typing = calls.findIndex((c) => c.method === 'POST' && c.path === `/channels/${dm}/typing`);
    const answer = calls.findIndex((c) => c.method === 'POST' && c.path === `/channels/${dm}/messages`);
    expect(typing).toBeGreaterThanOrEqual(0);
    expect(typing).toBeLessThan(answer);
    await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
  });

  it('reaches a person named by their user id (a persona\'s primary) in their DM, opened once', async () => {
    const eve = h.fake.user('eve').id;
    const first = await h.app.delivery.deliver({ dedupeKey: 'primary-1', connector: 'discord', chat: eve, text: 'a reminder for you' });
    const second = await h.app.delivery.deliver({ dedupeKey: 'primary-2', connector: 'discord', chat: eve, text: 'and another' });
    expect([first.status, second.status]).toEqual(['sent', 'sent']);
    expect(botMessages(h.fake.dmChannel('eve')).map((m) => m.content)).toEqual(['a reminder for you', 'and another']);
    expect(h.fake.callsOf('POST /users/@me/channels').filter((c) => c.body.recipient_id === eve)).toHaveLength(1);
  });
});
