import { describe, expect, it } from 'vitest';
import type { ReplyDraft } from '../../src/connector.ts';
import { createReplyStream, visibleDraft } from '../../src/agent/reply-stream.ts';

function recordingDraft() {
  const updates: string[] = [];
  let finished: string | undefined;
  let opened = 0;
  return {
    updates,
    finished: () => finished,
    opened: () => opened,
    connector: {
      draft: (): ReplyDraft => {
        opened++;
        return {
          update: (text) => void updates.push(text),
          finish: async (text) => {
            finished = text;
            return { ids: ['m1'] };
          },
        };
      },
    },
  };
}

describe('visibleDraft', () => {
  it.each([
    ['Hello <think>planning the answer', 'Hello'],
    ['<think>a</think>Answer', 'Answer'],
    ['Almost <thi', 'Almost'],
    ['a < b', 'a < b'],
  ])('%j shows %j', (text, shown) => expect(visibleDraft(text)).toBe(shown));
});

describe('a streamed reply', () => {
  it('opens one draft at the first visible text, never shows reasoning, and finishes with the final reply', async () => {
    const d = recordingDraft();
    const stream = createReplyStream(d.connector, { chat: 'c' });
    stream.startCall();
    stream.append('<think>');
    stream.append('secret plan</think>');
    expect(d.opened()).toBe(0);
    stream.append('Sunny');
    stream.append(' today.');
    expect(d.updates).toEqual(['Sunny', 'Sunny today.']);
    expect(await stream.finish('Sunny today.')).toEqual({ ids: ['m1'] });
    expect(d.finished()).toBe('Sunny today.');
    expect(d.opened()).toBe(1);
  });

  it("what a later model call writes replaces the text before a tool call, in the same draft", () => {
    const d = recordingDraft();
    const stream = createReplyStream(d.connector, { chat: 'c' });
    stream.startCall();
    stream.append('Let me look that up.');
    stream.startCall();
    stream.append('It is 21°C.');
    expect(d.updates).toEqual(['Let me look that up.', 'It is 21°C.']);
    expect(d.opened()).toBe(1);
  });

  it('a turn that ends without a reply keeps what it showed, finished with a note; one that showed nothing opens nothing', async () => {
    const d = recordingDraft();
    const stream = createReplyStream(d.connector, { chat: 'c' });
    stream.startCall();
    stream.append('Half an answ');
    await stream.finish(undefined, ' — stopped');
    expect(d.finished()).toBe('Half an answ — stopped');
    const quiet = createReplyStream(recordingDraft().connector, { chat: 'c' });
    expect(await quiet.finish('never shown')).toBeUndefined();
  });

  it('writes to the chat only while the process may act: one fenced while it was stopped writes nothing', async () => {
    const d = recordingDraft();
    let alive = true;
    let asked = 0;
    const stream = createReplyStream(d.connector, { chat: 'c' }, async () => (asked++, alive));
    stream.startCall();
    stream.append('Sunny');
    stream.append(' today');
    await new Promise((r) => setImmediate(r));
    expect(d.updates).toEqual(['Sunny', 'Sunny today']);
    // Back from a stop, and fenced meanwhile: the model's answer arrives, and nothing of it reaches the chat.
    alive = false;
    stream.append(', 21°C.');
    await new Promise((r) => setImmediate(r));
    expect(d.updates).toEqual(['Sunny', 'Sunny today']);
    await expect(stream.finish('Sunny today, 21°C.')).rejects.toThrow(/fenced/);
    expect(d.finished()).toBeUndefined();
    expect(asked).toBe(4);
  });
});
