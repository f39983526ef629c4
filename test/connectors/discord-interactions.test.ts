// Discord button clicks: each is answered at once with deferUpdate (within Discord's 3 s, while the chat's turn runs
// too), then resolved; the core's word on it goes to the clicker alone (ephemeral). A non-approver changes nothing;
// a stale or expired button gets a polite line; an answered question shows its outcome, and who chose, in place of
// its buttons, in a thread too.
import { describe, expect, it } from 'vitest';
import type { ApiMessage, InteractionCallback } from '../support/fake-discord.ts';
import { until } from '../support/until.ts';
import { useDiscordHarness } from './discord-harness.ts';

const EPHEMERAL = 1 << 6;

const h = useDiscordHarness({ tools: { approve: ['react'], approvalTimeoutSeconds: 30 } });

const question = (channel: string, text: RegExp) =>
  until(() => h.fake.messages(channel).findLast((m) => m.components.length > 0 && !(m.flags & EPHEMERAL) && text.test(m.content)), `a question matching ${text} in ${channel}`);
const button = (message: ApiMessage, label: string): string => {
  const found = message.components.flatMap((row: { components: { label: string; custom_id: string }[] }) => row.components).find((b: { label: string }) => b.label === label);
  if (!found) throw new Error(`no button ${label}`);
  return found.custom_id;
};

/** Clicks, and returns the callback with the notice that followed it (ephemeral, to the clicker). */
async function click(message: ApiMessage, customId: string, from: string, unchecked = false) {
  const callback: InteractionCallback = await h.fake.click({ message, customId, from, unchecked });
  const interaction = h.fake.interactions.find((i) => i.id === callback.interactionId)!;
  const notice = await until(() => (interaction.followups[0] ? h.fake.message(interaction.followups[0]) : undefined), `the notice of ${customId}`);
  const call = h.fake.callsOf(`POST /webhooks/:app/${interaction.token}`)[0];
  return { callback, notice, noticeAt: call.at };
}

describe('Discord buttons', () => {
  it('Allow once: the click is deferred at once, noted privately, and the question shows who allowed it instead of its buttons', async () => {
    h.llm.script({ toolCalls: [{ name: 'react', arguments: { emoji: '👍' } }] }, { text: 'reacted' });
    const asked = h.fake.sendDm({ from: 'ana', content: 'give me a thumbs up' });
    const dm = h.fake.dmChannel('ana');
    const approval = await question(dm, /react/);
    expect(approval.components[0].components.map((b: { label: string }) => b.label)).toEqual(['Allow once', 'Always allow', 'Deny']);
    const { callback, notice, noticeAt } = await click(approval, button(approval, 'Allow once'), 'ana');
    // deferUpdate (type 6) first; the core's notice after it.
    expect(callback.type).toBe(6);
    expect(callback.latencyMs).toBeLessThan(3000);
    expect(noticeAt).toBeGreaterThanOrEqual(callback.at);
    expect([notice.content, notice.flags & EPHEMERAL]).toEqual(['Allow once: noted.', EPHEMERAL]);
    expect(notice.interaction_metadata.user.id).toBe(h.fake.user('ana').id);
    await until(() => h.fake.messages(dm).find((m) => m.content === 'reacted'), 'the answer');
    const closed = h.fake.message(approval.id)!;
    expect(closed.components).toEqual([]);
    expect(closed.content).toMatch(/✅ Allowed once by @ana$/);
    expect(h.fake.message(asked.id)!.reactions.map((r: { emoji: { name: string } }) => r.emoji.name)).toEqual(['👍']);
    await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
  });

  it("a non-approver's click is answered, told privately it is not theirs, and changes nothing", async () => {
    h.llm.script({ toolCalls: [{ name: 'react', arguments: { emoji: '👀' } }] }, (req) => ({ text: `after: ${req.body.messages.at(-1).content}` }));
    h.fake.sendGuildMessage({ channel: 'team', from: 'ana', content: `<@${h.fake.bot.id}> look at this` });
    const approval = await question('team', /react/);
    const { callback, notice } = await click(approval, button(approval, 'Allow once'), 'bo');
    expect(callback.type).toBe(6);
    expect(callback.latencyMs).toBeLessThan(3000);
    expect([notice.content, notice.flags & EPHEMERAL]).toEqual(['This is not yours to approve.', EPHEMERAL]);
    expect(notice.interaction_metadata.user.id).toBe(h.fake.user('bo').id);
    await new Promise((r) => setTimeout(r, 300));
    expect(h.fake.message(approval.id)).toMatchObject({ content: approval.content, components: approval.components });
    expect(h.llm.requests).toHaveLength(1);
    // Ana's answer still counts.
    await click(approval, button(approval, 'Deny'), 'ana');
    const after = await until(() => h.fake.messages('team').find((m) => m.content.startsWith('after: ')), 'the answer');
    expect(after.content).toMatch(/^after: denied: react did not run/);
    expect(h.fake.message(approval.id)!.content).toMatch(/🚫 Denied by @ana$/);
    await h.app.waitForIdle(h.conversation({ channel: 'team' }));
  });

  it('clicks are answered within 3 s while the turn is still working, and a second click is told it was answered', async () => {
    h.llm.script({ toolCalls: [{ name: 'react', arguments: { emoji: '✅' } }] }, { text: 'done slowly', delayMs: 2500 });
    h.fake.sendDm({ from: 'bo', content: 'check it off' });
    const dm = h.fake.dmChannel('bo');
    // Bo is a user, not an approver: the approval goes to Ana, the persona's primary.
    const approval = await question(h.fake.dmChannel('ana'), /react/);
    expect(h.fake.messages(dm).some((m) => m.components.length > 0)).toBe(false);
    const first = await click(approval, button(approval, 'Allow once'), 'ana');
    // The turn is now waiting 2.5 s on the model; more clicks and a message come meanwhile.
    h.fake.sendDm({ from: 'bo', content: 'any news?' });
    const again = await click(approval, button(approval, 'Allow once'), 'ana', true);
    const stranger = await click(approval, button(approval, 'Deny'), 'bo', true);
    expect(h.fake.messages(dm).some((m) => m.content === 'done slowly')).toBe(false);
    for (const c of [first, again, stranger]) {
      expect(c.callback.type).toBe(6);
      expect(c.callback.latencyMs).toBeLessThan(3000);
    }
    expect(again.notice.content).toMatch(/^Already answered by @ana/);
    await until(() => h.fake.messages(dm).find((m) => m.content === 'done slowly'), 'the slow answer', 15_000);
    await h.app.waitForIdle(h.conversation({ dm: 'bo' }));
  });

  it('a stale button and an expired question get a polite private line, and wake nothing', async () => {
    const dm = h.fake.dmChannel('ana');
    const some = (await h.connector.send({ chat: dm, text: 'an old message with a button', buttons: [[{ label: 'Old', data: 'q:AAAAAAAAAAAAAAAA:1' }]] })).ids[0];
    const stale = await click(h.fake.message(some)!, 'q:AAAAAAAAAAAAAAAA:1', 'ana');
    expect([stale.callback.type, stale.notice.content, stale.notice.flags & EPHEMERAL]).toEqual([6, 'This button is no longer active.', EPHEMERAL]);

    h.llm.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Coffee or tea?', choices: ['Coffee', 'Tea'] } }] });
    h.fake.sendDm({ from: 'ana', content: 'ask me something' });
    const asked = await question(dm, /Coffee or tea\?/);
    await h.app.questions.expireOpen(h.conversation({ dm: 'ana' }), 'nobody answered');
    await until(() => h.fake.message(asked.id)!.components.length === 0, 'the expired question to lose its buttons');
    expect(h.fake.message(asked.id)!.content).toMatch(/⌛ Expired: nobody answered$/);
    const expired = await click(asked, button(asked, 'Tea'), 'ana', true);
    expect([expired.callback.type, expired.notice.content, expired.notice.flags & EPHEMERAL]).toEqual([6, 'This question has expired.', EPHEMERAL]);
    expect(expired.callback.latencyMs).toBeLessThan(3000);
    await new Promise((r) => setTimeout(r, 300));
    expect(h.llm.requests).toHaveLength(1);
  });

  it('a question asked in a thread is answered there: its outcome replaces the buttons in the thread', async () => {
    h.llm.script(
      { toolCalls: [{ name: 'ask_user', arguments: { question: 'Which day?', choices: ['Monday', 'Friday'] } }] },
      (req) => ({ text: `got: ${req.lastUserText.split('\n').at(-1)}` }),
    );
    h.fake.sendGuildMessage({ channel: 'team', thread: 'planning', from: 'ana', content: `<@${h.fake.bot.id}> plan the week` });
    const thread = h.fake.channel('planning').id;
    const asked = await question(thread, /Which day\?/);
    expect(h.fake.messages('team').some((m) => m.content.includes('Which day?'))).toBe(false);
    const { notice } = await click(asked, button(asked, 'Friday'), 'ana');
    expect(notice.content).toBe('Answer recorded: Friday');
    await until(() => h.fake.messages(thread).find((m) => m.content === 'got: Friday'), 'the answer in the thread');
    await until(() => h.fake.message(asked.id)!.components.length === 0, 'the outcome');
    expect(h.fake.message(asked.id)!.content).toMatch(/✅ Friday \(answered by @ana\)$/);
    expect(h.fake.callsOf(`PATCH /channels/${thread}/messages/${asked.id}`).map((c) => c.status)).toEqual([200]);
    await h.app.waitForIdle(h.conversation({ channel: 'team', thread: 'planning' }));
  });
});
