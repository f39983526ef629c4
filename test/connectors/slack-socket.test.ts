// Socket Mode's connection: a closed socket is reopened and nothing is lost, an acknowledgement lost with the
// connection is made good by Slack's redelivery, a socket that goes silent is replaced by the watchdog. And Block
// Kit questions: acknowledged at once while a turn runs, "not yours" told privately, the outcome in place.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chatConversationId } from '../../src/conversation-id.ts';
import { PERSONA, settle } from '../conformance/app.ts';
import { until } from '../support/until.ts';
import { HELPER, OWNER, OWNER_DM, sleep, startSlackHarness, type SlackHarness } from './slack-harness.ts';

let h: SlackHarness;
const dmConversation = chatConversationId(PERSONA, 'slack', OWNER_DM);

beforeAll(async () => {
  // A short watchdog: a ping unanswered for 400 ms replaces the socket (and the reconnect waits as long).
  h = await startSlackHarness({ mode: 'socket', connector: { pingTimeoutMs: 400 }, fake: { pingIntervalMs: 200 } });
});
afterAll(() => h?.stop());
beforeEach(async () => {
  await settle(h.app, [dmConversation]);
  h.model.reset();
  h.fake.reset();
});

describe('the Socket Mode connection', () => {
  it('is reopened after Slack closes it, and an event sent meanwhile is answered once it is back', async () => {
    const before = h.fake.totalConnections();
    h.fake.disconnect();
    await h.fake.waitFor(() => h.fake.openConnections() === 0);
    // Slack holds the event until a socket is open again.
    const delivery = await h.fake.dm({ user: OWNER, text: 'while you were away' });
    expect(delivery.acked).toBe(true);
    expect(h.fake.totalConnections()).toBe(before + 1);
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.app.waitForIdle(dmConversation);
    expect(h.texts(OWNER_DM)).toEqual(['echo: while you were away']);
    expect(h.connector.status?.()).toEqual({ state: 'up' });
  });

  it('an event whose acknowledgement was lost with the connection comes again (retry_attempt 1) and is answered once', async () => {
    const sent = h.fake.dm({ user: OWNER, text: 'did you get this?' }).catch(() => undefined);
    // The connection drops as the event arrives: the connector stores it but its ack cannot be sent.
    h.fake.disconnect({ abrupt: true });
    const first = await sent;
    await until(() => h.fake.openConnections() === 1, 'the new connection');
    const again = await h.fake.redeliver(first!, { retryReason: 'timeout' });
    expect(again.acked).toBe(true);
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await sleep(400);
    await h.app.waitForIdle(dmConversation);
    expect(h.texts(OWNER_DM)).toEqual(['echo: did you get this?']);
    expect(h.model.requests).toHaveLength(1);
  });

  it('a socket that stays open but silent (no pongs, no pings) is replaced by the watchdog', async () => {
    const opens = h.fake.callsOf('apps.connections.open').length;
    const before = h.fake.totalConnections();
    h.fake.setSilent(true);
    await h.fake.waitFor(() => h.fake.totalConnections() > before, 5000);
    h.fake.setSilent(false);
    await h.fake.waitFor(() => h.fake.openConnections() === 1, 5000);
    expect(h.fake.callsOf('apps.connections.open').length).toBeGreaterThan(opens);
    const delivery = await h.fake.dm({ user: OWNER, text: 'still there?' });
    expect(delivery.acked).toBe(true);
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.app.waitForIdle(dmConversation);
    expect(h.connector.status?.()).toEqual({ state: 'up' });
  });

  it('a disconnect warning from Slack (refresh_requested) makes it reconnect', async () => {
    const before = h.fake.totalConnections();
    h.fake.sendDisconnectWarning('refresh_requested');
    await h.fake.waitFor(() => h.fake.totalConnections() === before + 1 && h.fake.openConnections() === 1, 5000);
    await h.fake.dm({ user: OWNER, text: 'after the refresh' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.app.waitForIdle(dmConversation);
  });
});

describe('Block Kit questions', () => {
  it('buttons carry q:<id>:<choice> with unique action ids; clicks are acknowledged at once while the turn runs; the outcome replaces them', async () => {
    // After the approval the turn keeps the model busy for 1.5 s: the clicks must not wait for it.
    h.model.script({ toolCalls: [{ name: 'record_step', arguments: { note: 'alpha' } }] }, { text: 'recorded', delayMs: 1500 });
    await h.fake.dm({ user: OWNER, text: 'record alpha' });
    const question = await until(() => h.fake.messages(OWNER_DM).find((m) => m.blocks?.some((b) => b.type === 'actions')), 'the question');
    const [section, actions] = question.blocks!;
    expect(section).toMatchObject({ type: 'section', text: { type: 'mrkdwn' } });
    expect(section.text.text).toContain('record_step');
    const buttons = actions.elements as { action_id: string; value: string; text: { text: string } }[];
    expect(buttons.map((b) => b.text.text)).toEqual(['Allow once', 'Always allow', 'Deny']);
    for (const b of buttons) expect(b.value).toMatch(/^q:[\w-]+:[\w-]+$/);
    expect(new Set(buttons.map((b) => b.action_id)).size).toBe(3);

    // Someone who may not approve: told privately, and nothing changes.
    const refused = await h.fake.click({ message: { channel: OWNER_DM, ts: question.ts }, label: 'Allow once', user: HELPER });
    expect(refused.acked).toBe(true);
    const notice = await until(() => h.fake.ephemerals(OWNER_DM, HELPER)[0], 'the notice to the helper');
    expect(notice.text).toBe('This is not yours to approve.');
    await sleep(300);
    expect(h.fake.message(OWNER_DM, question.ts)?.edits).toBe(0);
    expect(h.fake.callsOf('chat.update')).toHaveLength(0);

    const allowed = await h.fake.click({ message: { channel: OWNER_DM, ts: question.ts }, label: 'Allow once', user: OWNER });
    expect(allowed.acked).toBe(true);
    expect(allowed.latencyMs).toBeLessThan(1000);
    const updated = await until(() => {
      const m = h.fake.message(OWNER_DM, question.ts);
      return m && m.edits > 0 ? m : undefined;
    }, 'the question updated');
    // The turn is still busy: every acknowledgement came before its answer.
    expect(h.texts(OWNER_DM).filter((t) => t === 'recorded')).toHaveLength(0);
    expect(updated.blocks?.some((b) => b.type === 'actions')).toBe(false);
    const shown = updated.blocks!.map((b) => b.text?.text).join('\n');
    expect(shown).toMatch(/Allowed once/);
    expect(shown).toContain('@ana');
    await until(() => h.texts(OWNER_DM).includes('recorded'), 'the answer');
    expect(h.tools.runs).toEqual(['alpha']);
    await h.app.waitForIdle(dmConversation);
  });

  it('a click on an answered question is acknowledged, told so privately, and changes nothing', async () => {
    h.model.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Ship it?', choices: ['Yes', 'No'] } }] }, { text: 'ok' });
    await h.fake.dm({ user: OWNER, text: 'ready?' });
    const question = await until(() => h.fake.messages(OWNER_DM).find((m) => m.blocks?.some((b) => b.type === 'actions')), 'the question');
    await h.fake.click({ message: { channel: OWNER_DM, ts: question.ts }, label: 'Yes', user: OWNER });
    await until(() => (h.fake.message(OWNER_DM, question.ts)?.edits ?? 0) > 0, 'the outcome');
    const late = await h.fake.click({ message: { channel: OWNER_DM, ts: question.ts }, label: 'No', user: OWNER, stale: true });
    expect(late.acked).toBe(true);
    const notices = await until(() => (h.fake.ephemerals(OWNER_DM, OWNER).length === 2 ? h.fake.ephemerals(OWNER_DM, OWNER) : undefined), 'both notices');
    expect(notices[1].text).toMatch(/^Already answered/);
    await h.app.waitForIdle(dmConversation);
    expect(h.fake.message(OWNER_DM, question.ts)?.edits).toBe(1);
  });
});
