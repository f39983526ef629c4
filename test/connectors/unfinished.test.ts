// What a connector without a platform key remembers of a message cut off after some of its parts.
import { describe, expect, it } from 'vitest';
import { createUnfinishedSends } from '../../connectors/shared/unfinished.ts';

const message = (key?: string, options: { resend?: boolean; text?: string } = {}) => ({
  chat: 'c1',
  text: options.text ?? 'a long answer',
  ...(key ? { key } : {}),
  ...(options.resend === false ? {} : { resend: true }),
});

describe('unfinished sends', () => {
  it('a retry of a keyed message cut off goes on from where it stopped; once whole, it is forgotten', () => {
    const unfinished = createUnfinishedSends();
    unfinished.keep(message('outbound:1'), ['101', '102'], 4);
    expect(unfinished.resume(message('outbound:1'), 4)).toEqual(['101', '102']);
    // Cut off again further on: the later point is kept.
    unfinished.keep(message('outbound:1'), ['101', '102', '103'], 4);
    expect(unfinished.resume(message('outbound:1'), 4)).toEqual(['101', '102', '103']);
    unfinished.finished(message('outbound:1'));
    expect(unfinished.resume(message('outbound:1'), 4)).toEqual([]);
  });

  it('keeps nothing without a key or before the first part went out', () => {
    const unfinished = createUnfinishedSends();
    unfinished.keep(message(), ['101'], 2);
    expect(unfinished.resume(message(), 2)).toEqual([]);
    unfinished.keep(message('outbound:2'), [], 2);
    expect(unfinished.resume(message('outbound:2'), 2)).toEqual([]);
  });

  it('gives nothing to a first attempt, which forgets what an earlier send of its key left, nor to another message under the key', () => {
    const unfinished = createUnfinishedSends();
    unfinished.keep(message('outbound:3'), ['101'], 2);
    expect(unfinished.resume(message('outbound:3', { resend: false }), 2)).toEqual([]);
    expect(unfinished.resume(message('outbound:3'), 2)).toEqual([]);
    // A row sent again after it failed for good, with another text (or split otherwise).
    unfinished.keep(message('outbound:4'), ['101'], 2);
    expect(unfinished.resume(message('outbound:4', { text: 'another answer' }), 2)).toEqual([]);
    expect(unfinished.resume(message('outbound:4'), 3)).toEqual([]);
    expect(unfinished.resume(message('outbound:4'), 2)).toEqual(['101']);
  });

  it('remembers 500 messages at most, forgetting the one cut off longest ago', () => {
    const unfinished = createUnfinishedSends();
    for (let i = 0; i < 501; i++) unfinished.keep(message(`outbound:${i}`), [String(i)], 2);
    expect(unfinished.resume(message('outbound:0'), 2)).toEqual([]);
    expect(unfinished.resume(message('outbound:1'), 2)).toEqual(['1']);
    expect(unfinished.resume(message('outbound:500'), 2)).toEqual(['500']);
  });
});
