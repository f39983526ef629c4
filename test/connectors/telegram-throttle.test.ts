import { describe, expect, it } from 'vitest';
import { createChatThrottle } from '../../connectors/telegram/throttle.ts';

async function timesOf(take: () => Promise<void>, n: number): Promise<number[]> {
  const start = Date.now();
  const at: number[] = [];
  for (let i = 0; i < n; i++) {
    await take();
    at.push(Date.now() - start);
  }
  return at;
}

describe('the per-chat throttle', () => {
  it('lets a chat burst, then paces sustained sending', async () => {
    const throttle = createChatThrottle({ burst: 3, perSecond: 10 });
    const at = await timesOf(() => throttle.take('7'), 5);
    expect(at.slice(0, 3).every((t) => t < 30)).toBe(true); // the first replies never wait
    expect(at[3]).toBeGreaterThanOrEqual(80);
    expect(at[4]).toBeGreaterThanOrEqual(180);
  });

  it('keeps chats apart and paces groups more slowly', async () => {
    const throttle = createChatThrottle({ burst: 1, perSecond: 10, groupPerMinute: 300 });
    await throttle.take('7');
    const other = Date.now();
    await throttle.take('8');
    expect(Date.now() - other).toBeLessThan(30);
    await throttle.take('-100');
    const group = Date.now();
    await throttle.take('-100');
    expect(Date.now() - group).toBeGreaterThanOrEqual(180); // 5 per second
  });
});
