// What a connector without a platform key remembers of a message cut off after some of its parts.
import { describe, expect, it } from 'vitest';
import { createUnfinishedSends } from '../../connectors/shared/unfinished.ts';

const message = (key?: string, resend = true) => ({ chat: 'c1', text: 'a long answer', ...(key ? { key } : {}), ...(resend ? { resend } : {}) });

describe('unfinished sends', () => {
  it('a retry of a keyed message cut off goes on from where it stopped; once whole, it is forgotten', () => {
    const unfinished = createUnfinishedSends();
    expect(unfinished.keep(message('outbound:1'), ['101', '102'], 2)).toBe(true);
    expect(unfinished.resume(message('outbound:1'))).toEqual({ steps: 2, ids: ['101', '102'] });
    // Cut off again further on: the later point is kept.
    unfinished.keep(message('outbound:1'), ['101', '102', '103'], 3);
    expect(unfinished.resume(message('outbound:1')).steps).toBe(3);
    unfinished.finished(message('outbound:1'));
    expect(unfinished.resume(message('outbound:1'))).toEqual({ steps: 0, ids: [] });
  });

  it('keeps nothing without a key or before the first part went out, and gives nothing to a first attempt', () => {
    const unfinished = createUnfinishedSends();
    expect(unfinished.keep(message(), ['101'], 1)).toBe(false);
    expect(unfinished.keep(message('outbound:2'), [], 0)).toBe(false);
    expect(unfinished.resume(message('outbound:2'))).toEqual({ steps: 0, ids: [] });
    unfinished.keep(message('outbound:3'), ['101'], 1);
    expect(unfinished.resume(message('outbound:3', false))).toEqual({ steps: 0, ids: [] });
  });

  it('remembers 500 messages at most, forgetting the one cut off longest ago', () => {
    const unfinished = createUnfinishedSends();
    for (let i = 0; i < 501; i++) unfinished.keep(message(`outbound:${i}`), [String(i)], 1);
    expect(unfinished.resume(message('outbound:0')).steps).toBe(0);
    expect(unfinished.resume(message('outbound:1')).steps).toBe(1);
    expect(unfinished.resume(message('outbound:500')).steps).toBe(1);
  });
});
