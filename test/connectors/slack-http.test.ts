// HTTP mode: Slack posts events and interactions to POST /slack/events on Parlor's HTTP server. The signature is
// checked before anything else, url_verification is answered, and the 200 goes back once the event is stored.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chatConversationId } from '../../src/conversation-id.ts';
import { PERSONA, settle } from '../conformance/app.ts';
import { interactionForm, signedRequest } from '../support/fake-slack.ts';
import { until } from '../support/until.ts';
import { OWNER, OWNER_DM, SIGNING_SECRET, sleep, startSlackHarness, type SlackHarness } from './slack-harness.ts';

let h: SlackHarness;
const dmConversation = chatConversationId(PERSONA, 'slack', OWNER_DM);
let nextTs = 1_700_001_000;

const dmEvent = (text: string) => {
  const ts = `${nextTs++}.000100`;
  return { type: 'message', channel: OWNER_DM, channel_type: 'im', user: OWNER, text, ts, event_ts: ts };
};
const post = (request: { body: string; headers: Record<string, string> }) => fetch(h.eventsUrl!, { method: 'POST', headers: request.headers, body: request.body });

beforeAll(async () => {
  // The tests post themselves; the fake delivers only the bot's own posts back (over HTTP too).
  h = await startSlackHarness({ mode: 'http' });
});
afterAll(() => h?.stop());
beforeEach(async () => {
  await settle(h.app, [dmConversation]);
  h.model.reset();
  h.fake.reset();
});

describe('Slack HTTP mode', () => {
  it('is served on Parlor’s HTTP server, and opens no socket', () => {
    expect(h.connector.webhook?.path).toBe('/slack/events');
    expect(h.fake.callsOf('apps.connections.open')).toHaveLength(0);
    expect(h.fake.totalConnections()).toBe(0);
  });

  it('answers url_verification with its challenge', async () => {
    const response = await post(signedRequest({ token: 'x', challenge: 'c-123', type: 'url_verification' }, SIGNING_SECRET));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ challenge: 'c-123' });
  });

  it('refuses a bad, missing or stale signature with 401 and stores nothing', async () => {
    const body = h.fake.eventCallback(dmEvent('forged'));
    const stale = Math.floor(Date.now() / 1000) - 6 * 60;
    const wrongSecret = signedRequest(body, 'not-the-secret');
    const { 'x-slack-signature': _signature, ...unsigned } = signedRequest(body, SIGNING_SECRET).headers;
    const answers = [
      await post(signedRequest(body, SIGNING_SECRET, { badSignature: true })),
      await post(wrongSecret),
      await post(signedRequest(body, SIGNING_SECRET, { timestamp: stale })),
      await post({ body: JSON.stringify(body), headers: unsigned }),
      // A challenge is checked too: nobody learns the endpoint answers without the secret.
      await post(signedRequest({ type: 'url_verification', challenge: 'c' }, 'not-the-secret')),
    ];
    expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    await sleep(300);
    expect(await h.count('inbound_events')).toBe(0);
    expect(h.model.requests).toHaveLength(0);
  });

  it('answers 200 once the event is stored; a retry with X-Slack-Retry-Num is answered 200 and not again', async () => {
    const body = h.fake.eventCallback(dmEvent('hello over http'), 'EvHTTP1');
    const first = await post(signedRequest(body, SIGNING_SECRET));
    expect(first.status).toBe(200);
    // Stored before the answer went back.
    expect(await h.count('inbound_events')).toBe(1);
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    for (const retryNum of [1, 2]) {
      const again = await post(signedRequest(body, SIGNING_SECRET, { retryNum, retryReason: 'http_timeout' }));
      expect(again.status).toBe(200);
    }
    await sleep(400);
    await h.app.waitForIdle(dmConversation);
    expect(h.texts(OWNER_DM)).toEqual(['echo: hello over http']);
    expect(h.model.requests).toHaveLength(1);
  });

  it('takes a click as a signed payload form and acknowledges it at once', async () => {
    h.model.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Tea or coffee?', choices: ['Tea', 'Coffee'] } }] }, (req) => ({ text: `got: ${req.lastUserText}` }));
    await post(signedRequest(h.fake.eventCallback(dmEvent('a drink?')), SIGNING_SECRET));
    const question = await until(() => h.fake.messages(OWNER_DM).find((m) => m.blocks?.some((b) => b.type === 'actions')), 'the question');
    const payload = h.fake.blockActions({ message: { channel: OWNER_DM, ts: question.ts }, label: 'Tea', user: OWNER });
    const started = Date.now();
    const response = await post(signedRequest(interactionForm(payload), SIGNING_SECRET));
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3000);
    await until(() => h.texts(OWNER_DM).some((t) => t.startsWith('got: ')), 'the answer');
    expect(h.texts(OWNER_DM).find((t) => t.startsWith('got: '))).toMatch(/\nTea$/);
    await h.app.waitForIdle(dmConversation);
  });

  it('refuses a click whose signature is wrong, and nothing is answered', async () => {
    h.model.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Left or right?', choices: ['Left', 'Right'] } }] }, { text: 'noted' });
    await post(signedRequest(h.fake.eventCallback(dmEvent('which way?')), SIGNING_SECRET));
    const question = await until(() => h.fake.messages(OWNER_DM).find((m) => m.blocks?.some((b) => b.type === 'actions')), 'the question');
    const payload = h.fake.blockActions({ message: { channel: OWNER_DM, ts: question.ts }, label: 'Left', user: OWNER });
    const response = await post(signedRequest(interactionForm(payload), SIGNING_SECRET, { badSignature: true }));
    expect(response.status).toBe(401);
    await sleep(400);
    expect(h.fake.message(OWNER_DM, question.ts)?.edits).toBe(0);
    expect(h.texts(OWNER_DM)).not.toContain('noted');
  });
});
