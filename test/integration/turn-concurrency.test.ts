// PARLOR_TURN_CONCURRENCY: how many turns one process runs at once; the next conversation's turn waits for a place.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ env: { PARLOR_TURN_CONCURRENCY: '1' } });
});
afterAll(async () => {
  await h?.stop();
});

it('with PARLOR_TURN_CONCURRENCY=1, a second conversation waits for the first turn to end', async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  h.fake.script(async () => {
    await held;
    return { text: 'slow answer' };
  });
  await h.chat.inject({ text: 'first, slow' });
  await until(() => h.fake.requests.some((r) => r.lastUserText === 'first, slow'), 'the first model call');
  await h.chat.inject({ text: 'second, elsewhere', chat: { id: 'g2', type: 'group' } });
  await new Promise((r) => setTimeout(r, 500));
  // One place, taken: the other conversation's turn has not begun.
  expect(h.fake.requests.map((r) => r.lastUserText)).toEqual(['first, slow']);
  release();
  await h.chat.waitForSent(2);
  expect(h.chat.sent.map((m) => m.text).sort()).toEqual(['echo: [Ana (chat:u1)] second, elsewhere', 'slow answer']);
});
