// Acknowledging Slack by its 3 s deadline, whatever the core does: the connector alone, with a core that is slow
// to store (acknowledged at the deadline, then stored anyway) or fails (not acknowledged, so Slack sends it again).
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSlackConnector } from '../../connectors/slack/index.ts';
import type { Connector, InboundEvent, IngressResult } from '../../src/connector.ts';
import { signedRequest, startFakeSlack, type FakeSlack } from '../support/fake-slack.ts';
import { until } from '../support/until.ts';

const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let fake: FakeSlack;
beforeAll(async () => {
  fake = await startFakeSlack({ echoBotMessages: false });
});
afterAll(() => fake?.close());

/** A core that takes `delayMs` to store each event, failing the first `failures` times. */
function slowCore(delayMs: number, failures = 0) {
  const calls: InboundEvent[] = [];
  const stored: InboundEvent[] = [];
  let failed = 0;
  return {
    calls,
    stored,
    async handle(event: InboundEvent): Promise<IngressResult> {
      calls.push(event);
      await sleep(delayMs);
      if (failed++ < failures) throw new Error('database unavailable');
      stored.push(event);
      return { status: 'queued' };
    },
  };
}

describe('in Socket Mode', () => {
  let connector: Connector;
  afterAll(() => connector?.stop());

  it('an event the core takes 4 s to store is acknowledged before 3 s, and stored once', async () => {
    const core = slowCore(4000);
    connector = createSlackConnector({ botToken: fake.botToken, appToken: fake.appToken, apiUrl: fake.apiUrl, log });
    await connector.start((e) => core.handle(e));
    const delivery = await fake.dm({ user: 'U0OWNER', text: 'slow to store' });
    expect(delivery.acked).toBe(true);
    expect(delivery.latencyMs).toBeLessThan(3000);
    expect(delivery.latencyMs).toBeGreaterThan(2000);
    await until(() => core.stored.length === 1, 'the event stored', 6000);
    expect(core.calls).toHaveLength(1);
    await connector.stop();
  });

  it('an event the core fails to store before the deadline is left unacknowledged (Slack sends it again)', async () => {
    const core = slowCore(50, 1);
    connector = createSlackConnector({ botToken: fake.botToken, appToken: fake.appToken, apiUrl: fake.apiUrl, log });
    await connector.start((e) => core.handle(e));
    const first = await fake.sendEvent(
      { type: 'message', channel: 'D0OWNER', channel_type: 'im', user: 'U0OWNER', text: 'try again', ts: '1700003000.000100' },
      { timeoutMs: 1500 },
    );
    expect(first).toMatchObject({ delivered: true, acked: false });
    const again = await fake.redeliver(first);
    expect(again.acked).toBe(true);
    expect(core.stored.map((e) => e.text)).toEqual(['try again']);
    await connector.stop();
  });
});

describe('in HTTP mode', () => {
  it('answers 200 before 3 s while the core is still storing, and 500 when it fails before then', async () => {
    const core = slowCore(4000);
    const connector = createSlackConnector({ botToken: fake.botToken, signingSecret: 'secret', apiUrl: fake.apiUrl, log });
    await connector.start((e) => core.handle(e));
    const event = { type: 'message', channel: 'D0OWNER', channel_type: 'im', user: 'U0OWNER', text: 'slow over http', ts: '1700003100.000100' };
    const request = signedRequest(fake.eventCallback(event), 'secret');
    const started = Date.now();
    const response = await connector.webhook!.handle(new Request('http://parlor.test/slack/events', { method: 'POST', headers: request.headers, body: request.body }));
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3000);
    await until(() => core.stored.length === 1, 'the event stored', 6000);

    const failing = slowCore(50, 1);
    const second = createSlackConnector({ botToken: fake.botToken, signingSecret: 'secret', apiUrl: fake.apiUrl, log });
    await second.start((e) => failing.handle(e));
    const again = signedRequest(fake.eventCallback({ ...event, ts: '1700003100.000200' }), 'secret');
    const failed = await second.webhook!.handle(new Request('http://parlor.test/slack/events', { method: 'POST', headers: again.headers, body: again.body }));
    expect(failed.status).toBe(500);
    await connector.stop();
    await second.stop();
  });
});
