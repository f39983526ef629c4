import { describe, expect, it } from 'vitest';
import { sanitizeEvent, sanitizeText } from '../../src/ingress/sanitize.ts';

describe('sanitizeText', () => {
  it('drops NUL, replaces lone surrogates, and keeps everything else, emoji included', () => {
    expect(sanitizeText('a\u0000b')).toBe('ab');
    expect(sanitizeText('x\ud800y\udc00z')).toBe('x\ufffdy\ufffdz');
    expect(sanitizeText('😀 \u0001 tab\t ok')).toBe('😀 \u0001 tab\t ok');
    expect(sanitizeText('end\ud83d')).toBe('end\ufffd');
  });
});

describe('sanitizeEvent', () => {
  it('cleans every string of the event, in nested objects and arrays, and leaves other values alone', () => {
    const event = {
      text: 'hi\u0000',
      chat: { id: '7', type: 'dm', title: 'T\ud800' },
      attachments: [{ type: 'document', name: 're\u0000port.pdf', size: 15 }],
      mentioned: true,
    };
    expect(sanitizeEvent(event)).toEqual({
      text: 'hi',
      chat: { id: '7', type: 'dm', title: 'T\ufffd' },
      attachments: [{ type: 'document', name: 'report.pdf', size: 15 }],
      mentioned: true,
    });
    expect(event.text).toBe('hi\u0000');
  });
});
