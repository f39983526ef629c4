// Long polling against a Bot API that answers at once with nothing: many empty polls must leave nothing behind.
import { getEventListeners } from 'node:events';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTelegramApi, createTelegramConnector } from '../../connectors/telegram/index.ts';
import { pollUpdates, type PollingOptions } from '../../connectors/telegram/polling.ts';
import { startFakeTelegram, type FakeTelegram } from '../support/fake-telegram.ts';
import { until } from '../support/until.ts';

let api: FakeTelegram;
const log = pino({ level: 'silent' });


beforeAll(async () => {
  api = await startFakeTelegram();
});
afterAll(async () => {
  await api?.close();
});

/** The polling loop against the fake, answering at once. */
const poll = (signal: AbortSignal, options: Pick<PollingOptions, 'handle'> & Partial<PollingOptions>) =>
  pollUpdates({ api: createTelegramApi('1:x', api.apiRoot), signal, timeoutSeconds: 0, allowedUpdates: ['message'], log, ...options });

describe('long polling', () => {
  it('leaves the abort signal\'s listener count flat over many empty polls', async () => {
    const stopper = new AbortController();
    const counts: number[] = [];
    const polls = api.callsOf('getUpdates').length;
    const loop = poll(stopper.signal, { handle: async () => {}, idleDelayMs: 5 });
    const sampler = setInterval(() => counts.push(getEventListeners(stopper.signal, 'abort').length), 10);
    await until(() => api.callsOf('getUpdates').length - polls >= 60);
    clearInterval(sampler);
    stopper.abort();
    await loop;
    // One listener at most at any moment: the pending getUpdates call's, or the pause's.
    expect(Math.max(...counts)).toBeLessThanOrEqual(1);
    expect(getEventListeners(stopper.signal, 'abort')).toHaveLength(0);
  });

  it('raises no MaxListenersExceededWarning while the connector polls an empty queue', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => void warnings.push(w);
    process.on('warning', onWarning);
    const connector = createTelegramConnector({ token: '1:x', apiRoot: api.apiRoot, log, pollTimeoutSeconds: 0 });
    try {
      const polls = api.callsOf('getUpdates').length;
      await connector.start(async () => ({ status: 'queued' }));
      // Each empty answer is followed by a short pause; 15 of them used to leave 15 listeners on the signal.
      await until(() => api.callsOf('getUpdates').length - polls >= 15);
      await connector.stop();
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('an update whose storing never finishes is fetched and stored again beside it, and the updates after it follow', async () => {
    const stopper = new AbortController();
    const handled: number[] = [];
    let first = true;
    const dm = (id: number) => ({ update_id: id, message: { message_id: id, date: 0, chat: { id: 7, type: 'private' }, from: { id: 7, is_bot: false, first_name: 'A' }, text: `m${id}` } });
    api.queueUpdates(dm(500), dm(501));
    const loop = poll(stopper.signal, {
      // The first try of the first update never settles, as a statement on a connection that died with Postgres.
      handle: (update) => {
        if (first) {
          first = false;
          return new Promise<void>(() => {});
        }
        handled.push(update.update_id);
        return Promise.resolve();
      },
      stallMs: 200,
      retryDelayMs: 20,
      idleDelayMs: 5,
    });
    await until(() => handled.includes(501), 'the update after it');
    stopper.abort();
    await loop;
    expect(handled).toEqual([500, 501]);
  });
});
