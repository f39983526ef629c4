import { describe, expect, it } from 'vitest';
import { MAX_PAYLOAD_BYTES, decodeChoice, encodeChoice, newQuestionId, shortQuestionId } from '#src/questions/codec.ts';

describe('question ids', () => {
  it('are random, URL-safe and 96 bits (16 base64url characters)', () => {
    const ids = Array.from({ length: 2000 }, () => newQuestionId());
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(new Set(ids).size).toBe(ids.length);
    // Safe in a URL path without escaping.
    for (const id of ids.slice(0, 50)) expect(encodeURIComponent(id)).toBe(id);
  });

  it('have a short form: the first six characters', () => {
    expect(shortQuestionId('abcdefghijklmnop')).toBe('abcdef');
    const id = newQuestionId();
    expect(id.startsWith(shortQuestionId(id))).toBe(true);
    expect(shortQuestionId(id)).toHaveLength(6);
  });
});

describe('button payloads', () => {
  it('round-trip: q:<question id>:<choice id>', () => {
    const id = newQuestionId();
    for (const choice of ['1', '5', 'once', 'always', 'deny', 'a_b-C', 'x'.repeat(16)]) {
      const payload = encodeChoice(id, choice);
      expect(payload).toBe(`q:${id}:${choice}`);
      expect(decodeChoice(payload)).toEqual({ questionId: id, choiceId: choice });
    }
  });

  it('fit in Telegram callback data (64 bytes) even at the longest ids allowed', () => {
    expect(MAX_PAYLOAD_BYTES).toBe(64);
    for (let i = 0; i < 100; i++) expect(Buffer.byteLength(encodeChoice(newQuestionId(), String((i % 5) + 1)))).toBeLessThanOrEqual(64);
    const longest = encodeChoice('i'.repeat(40), 'c'.repeat(16));
    expect(Buffer.byteLength(longest)).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(decodeChoice(longest)).toEqual({ questionId: 'i'.repeat(40), choiceId: 'c'.repeat(16) });
  });

  it('refuses to encode over-long or malformed ids', () => {
    expect(() => encodeChoice('i'.repeat(41), '1')).toThrow(/malformed or over 64 bytes/);
    expect(() => encodeChoice(newQuestionId(), 'c'.repeat(17))).toThrow(/malformed or over 64 bytes/);
    expect(() => encodeChoice('', '1')).toThrow();
    expect(() => encodeChoice(newQuestionId(), '')).toThrow();
    expect(() => encodeChoice('has:colon', '1')).toThrow();
    expect(() => encodeChoice('has space', '1')).toThrow();
    expect(() => encodeChoice(newQuestionId(), 'é')).toThrow();
  });

  it('decode malformed payloads to undefined', () => {
    const id = newQuestionId();
    for (const payload of [
      '',
      'q:',
      'q::',
      `q:${id}`,
      `q:${id}:`,
      `q::1`,
      `x:${id}:1`,
      `Q:${id}:1`,
      `q:${id}:1:2`,
      `q:${id}:1 `,
      ` q:${id}:1`,
      `q:${id}:1\n`,
      `q:${'i'.repeat(41)}:1`,
      `q:${id}:${'c'.repeat(17)}`,
      `q:${id}:é`,
      `q:${id.slice(0, 8)}/${id.slice(9)}:1`,
      'approve:yes',
      JSON.stringify({ q: id, c: '1' }),
    ]) {
      expect(decodeChoice(payload), payload).toBeUndefined();
    }
  });
});
