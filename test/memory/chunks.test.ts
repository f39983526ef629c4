// The knowledge base's chunker: pieces that end where paragraphs end, repeat the end of the one before, start at
// every Markdown heading, and never cut a word.
import { describe, expect, it } from 'vitest';
import { chunkText } from '../../src/memory/chunks.ts';

/** A paragraph of `n` sentences, each naming its paragraph and place, so every piece of text is unique. */
const paragraph = (p: number, n: number) => Array.from({ length: n }, (_, s) => `Paragraph ${p} sentence ${s} tells about item${p}x${s} here.`).join(' ');

describe('chunkText', () => {
  it('packs whole paragraphs up to the size, each chunk ending where a paragraph ends', () => {
    const paragraphs = Array.from({ length: 30 }, (_, p) => paragraph(p, 4));
    const chunks = chunkText(paragraphs.join('\n\n'));
    expect(chunks.length).toBeGreaterThan(5);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(1200);
      expect(paragraphs.some((p) => chunk.endsWith(p))).toBe(true);
    }
    // Every paragraph is whole in some chunk, and the chunks are not much more than the text.
    for (const p of paragraphs) expect(chunks.some((chunk) => chunk.includes(p))).toBe(true);
    // Full: a chunk holds more than half the size (the last may be short).
    for (const chunk of chunks.slice(0, -1)) expect(chunk.length).toBeGreaterThan(600);
  });

  it('starts each chunk with the end of the one before, at most the overlap, in whole words', () => {
    const text = Array.from({ length: 20 }, (_, p) => paragraph(p, 6)).join('\n\n');
    const chunks = chunkText(text, { size: 1200, overlap: 200 });
    expect(chunks.length).toBeGreaterThan(3);
    for (let i = 1; i < chunks.length; i++) {
      const previous = chunks[i - 1];
      // The longest start of this chunk that the previous one ends with.
      let shared = 0;
      for (let n = 1; n <= Math.min(previous.length, chunks[i].length); n++) if (previous.endsWith(chunks[i].slice(0, n))) shared = n;
      expect(shared).toBeGreaterThan(100);
      expect(shared).toBeLessThanOrEqual(200);
      expect(previous[previous.length - shared - 1]).toMatch(/\s/);
    }
  });

  it('starts a chunk at every heading, keeps a heading with nothing under it with the next, and ignores # in code', () => {
    const text = [
      '# Handbook',
      '## Holidays',
      'Everyone has 25 days.',
      '```sh',
      '# not a heading, a shell comment',
      'echo hi',
      '```',
      '## Expenses',
      'Receipts within a month.',
      '### Travel',
      'Trains, not planes, under 600 km.',
    ].join('\n');
    expect(chunkText(text)).toEqual([
      '# Handbook\n\n## Holidays\n\nEveryone has 25 days.\n```sh\n# not a heading, a shell comment\necho hi\n```',
      '## Expenses\n\nReceipts within a month.',
      '### Travel\n\nTrains, not planes, under 600 km.',
    ]);
  });

  it('cuts a paragraph longer than a chunk between sentences, never inside a word', () => {
    const text = paragraph(1, 80);
    const words = new Set(text.split(/\s+/));
    const chunks = chunkText(text);
    expect(chunks.length).toBeGreaterThan(3);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(1200);
      for (const word of chunk.split(/\s+/)) expect(words.has(word)).toBe(true);
      expect(chunk).toMatch(/here\.$/);
    }
    // Nothing is lost: every sentence is in a chunk.
    for (const sentence of text.split(/(?<=\.) /)) expect(chunks.some((c) => c.includes(sentence))).toBe(true);
  });

  it('cuts a word only when it alone is longer than a chunk, and has no chunk for blank text', () => {
    const chunks = chunkText(`start ${'x'.repeat(2500)} end`, { size: 1000, overlap: 100 });
    expect(chunks.every((c) => c.length <= 1000)).toBe(true);
    expect(chunks.join('').replace(/\s/g, '')).toContain('x'.repeat(900));
    expect(chunkText(' \n\n \t\n')).toEqual([]);
  });
});
