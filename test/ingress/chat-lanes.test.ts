// A chat's events stored in the order they came: the lane one waits in behind its chat's earlier event.
import { describe, expect, it } from 'vitest';
import type { InboundEvent } from '../../src/connector.ts';
import { createChatLanes } from '../../src/ingress/chat-lanes.ts';

const event = (externalId: string, chat = 'c1', thread?: string): InboundEvent => ({
  connector: 'chat',
  externalId,
  kind: 'message',
  chat: { id: chat, type: 'dm', ...(thread ? { thread } : {}) },
  sender: { id: 'u1' },
  text: externalId,
});

/** A store the test settles: `order` records when each began. */
function stores() {
  const order: string[] = [];
  const pending = new Map<string, { resolve: () => void; reject: (err: Error) => void }>();
  return {
    order,
    store: (name: string) => () =>
      new Promise<string>((resolve, reject) => {
        order.push(name);
        pending.set(name, { resolve: () => resolve(name), reject });
      }),
    end: (name: string) => pending.get(name)!.resolve(),
    fail: (name: string) => pending.get(name)!.reject(new Error(`${name} failed`)),
  };
}
const tick = () => new Promise((r) => setTimeout(r, 20));

describe('chat lanes', () => {
  it("start a chat's event once its earlier one is stored, or has failed; other chats and threads at once", async () => {
    const lanes = createChatLanes();
    const s = stores();
    const a = lanes.inOrder(event('a'), s.store('a'));
    const b = lanes.inOrder(event('b'), s.store('b'));
    const c = lanes.inOrder(event('c'), s.store('c'));
    const other = lanes.inOrder(event('x', 'c2'), s.store('x'));
    const thread = lanes.inOrder(event('t', 'c1', 't1'), s.store('t'));
    await tick();
    expect(s.order).toEqual(['a', 'x', 't']);
    s.fail('a');
    await expect(a).rejects.toThrow('a failed');
    await tick();
    expect(s.order).toEqual(['a', 'x', 't', 'b']);
    s.end('b');
    await tick();
    expect(s.order).toEqual(['a', 'x', 't', 'b', 'c']);
    for (const name of ['c', 'x', 't']) s.end(name);
    expect(await Promise.all([b, c, other, thread])).toEqual(['b', 'c', 'x', 't']);
  });

  it('run another attempt of an event under way beside it, and let the chat go on once that one has stored it', async () => {
    const lanes = createChatLanes();
    const s = stores();
    void lanes.inOrder(event('a'), s.store('a (hangs)'));
    const next = lanes.inOrder(event('b'), s.store('b'));
    const again = lanes.inOrder(event('a'), s.store('a (again)'));
    await tick();
    expect(s.order).toEqual(['a (hangs)', 'a (again)']);
    s.end('a (again)');
    expect(await again).toBe('a (again)');
    await tick();
    expect(s.order).toEqual(['a (hangs)', 'a (again)', 'b']);
    s.end('b');
    expect(await next).toBe('b');
  });

  it('start another attempt of an event still waiting behind its chat only once that event begins (Slack tries a late event again beside it)', async () => {
    const lanes = createChatLanes();
    const s = stores();
    void lanes.inOrder(event('a'), s.store('a'));
    void lanes.inOrder(event('b'), s.store('b'));
    const again = lanes.inOrder(event('b'), s.store('b (again)'));
    await tick();
    expect(s.order).toEqual(['a']);
    s.end('a');
    await tick();
    expect(s.order).toEqual(['a', 'b', 'b (again)']);
    s.end('b (again)');
    expect(await again).toBe('b (again)');
  });

  it("hold a chat a moment for a store that failed for a passing reason, so that its next attempt comes before the chat's later events", async () => {
    const lanes = createChatLanes({ retryGraceMs: 1000, heldFor: (err) => (err as Error).message === 'a failed' });
    const s = stores();
    const a = lanes.inOrder(event('a'), s.store('a'));
    const b = lanes.inOrder(event('b'), s.store('b'));
    await tick();
    s.fail('a');
    await expect(a).rejects.toThrow('a failed');
    await tick();
    expect(s.order).toEqual(['a']);
    // Its connector tries it again: it goes first, then the chat goes on.
    const again = lanes.inOrder(event('a'), s.store('a (again)'));
    await tick();
    expect(s.order).toEqual(['a', 'a (again)']);
    s.end('a (again)');
    expect(await again).toBe('a (again)');
    await tick();
    expect(s.order).toEqual(['a', 'a (again)', 'b']);
    s.end('b');
    expect(await b).toBe('b');
  });

  it('let the chat go on when a failed store is not tried again within the moment', async () => {
    const lanes = createChatLanes({ retryGraceMs: 100, heldFor: () => true });
    const s = stores();
    const a = lanes.inOrder(event('a'), s.store('a'));
    const b = lanes.inOrder(event('b'), s.store('b'));
    await tick();
    s.fail('a');
    await expect(a).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 150));
    expect(s.order).toEqual(['a', 'b']);
    s.end('b');
    expect(await b).toBe('b');
  });

  it('let an event wait behind its chat no longer than a bound (a store left hanging)', async () => {
    const lanes = createChatLanes({ waitMs: 100 });
    const s = stores();
    void lanes.inOrder(event('a'), s.store('a (hangs)'));
    const next = lanes.inOrder(event('b'), s.store('b'));
    await tick();
    expect(s.order).toEqual(['a (hangs)']);
    await new Promise((r) => setTimeout(r, 150));
    expect(s.order).toEqual(['a (hangs)', 'b']);
    s.end('b');
    expect(await next).toBe('b');
  });
});
