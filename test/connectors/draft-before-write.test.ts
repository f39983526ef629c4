// A streamed reply's draft writes to its chat only once `beforeWrite` lets it, before every frame and before the
// final text: a process back from a long stop, fenced meanwhile (its turn another process's now), writes nothing.
import { describe, expect, it } from 'vitest';
import { createDiscordDraft } from '../../connectors/discord/draft.ts';
import { createFramePacer } from '../../connectors/shared/frame-pacer.ts';

/** A gate that holds what waits on it until it is opened. */
function gate() {
  let open = false;
  const waiting: (() => void)[] = [];
  return {
    before: () => (open ? Promise.resolve() : new Promise<void>((resolve) => waiting.push(resolve))),
    open() {
      open = true;
      for (const resolve of waiting.splice(0)) resolve();
    },
  };
}

const tick = (ms = 30) => new Promise((r) => setTimeout(r, ms));

describe('the frame pacer', () => {
  it('writes a frame only once beforeFrame lets it, and then the newest text', async () => {
    const frames: string[] = [];
    const g = gate();
    const pacer = createFramePacer({ intervalMs: 10, beforeFrame: g.before, frame: async (text) => (frames.push(text), true) });
    pacer.update('Sun');
    await tick();
    pacer.update('Sunny');
    await tick();
    expect(frames).toEqual([]);
    g.open();
    await tick();
    expect(frames).toEqual(['Sunny']);
    await pacer.stop();
  });
});

describe("Discord's draft", () => {
  it('posts nothing, frame or final text, while beforeWrite holds it', async () => {
    const writes: string[] = [];
    const g = gate();
    const draft = createDiscordDraft({
      target: { chat: 'c', beforeWrite: g.before },
      post: async (text) => (writes.push(`post ${text}`), 'm1'),
      edit: async (_id, text) => void writes.push(`edit ${text}`),
      send: async (text) => (writes.push(`send ${text}`), { ids: ['m2'] }),
      isGone: () => false,
      firstPart: (text) => ({ first: text, rest: '' }),
      onError: () => {},
    });
    draft.update('Sunny');
    const finished = draft.finish('Sunny today.');
    await tick(100);
    expect(writes).toEqual([]);
    g.open();
    expect(await finished).toEqual({ ids: ['m2'] });
    expect(writes).toEqual(['send Sunny today.']);
  });
});
