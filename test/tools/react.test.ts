// The react tool takes an emoji as itself (the one convention of the core), or a server's own emoji as a platform
// writes it; a name is refused with what to write instead.
import { describe, expect, it } from 'vitest';
import { createReactTool } from '../../tools/react.ts';
import { makeToolContext } from '../support/persona.ts';

const react = createReactTool();

describe('react', () => {
  it.each(['👍', '🎉', '❤️', '👍🏽', '🇫🇷', '1️⃣', '<:parlor:123456789012345678>', '<a:dance:123456789012345678>'])('sets %s as it is', async (emoji) => {
    const ctx = makeToolContext();
    expect(await react.run({ emoji }, ctx)).toBe(`reacted with ${emoji}`);
    expect(ctx.reactions).toEqual([{ emoji, messageId: undefined }]);
  });

  it.each([':thumbsup:', 'thumbsup', '+1', '<:bad name:1>', 'ok'])('refuses %s, saying to write the emoji itself', async (emoji) => {
    const ctx = makeToolContext();
    expect(await react.run({ emoji }, ctx)).toBe(`error: "${emoji}" is not an emoji; write the emoji itself, e.g. "👍", not its name`);
    expect(ctx.reactions).toEqual([]);
  });
});
