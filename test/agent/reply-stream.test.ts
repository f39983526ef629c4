import { describe, expect, it } from 'vitest';
import type { DraftTarget, ReplyDraft } from '../../src/connector.ts';
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

  it('hands the draft what it must wait for before each write to the chat (a process fenced meanwhile writes nothing)', async () => {
    const targets: DraftTarget[] = [];
    const d = recordingDraft();
    const beforeWrite = async () => {};
    const stream = createReplyStream({ draft: (target) => (targets.push(target), d.connector.draft()) }, { chat: 'c' }, beforeWrite);
    stream.startCall();
    stream.append('Sunny');
    await stream.finish('Sunny.');
    expect(targets).toHaveLength(1);
    expect(targets[0]).toMatchObject({ chat: 'c', beforeWrite });
  });
});
