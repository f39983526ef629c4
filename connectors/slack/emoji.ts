// Reactions: the core writes Unicode emoji (`👍`), Slack names them (`+1`, `thumbsup`). The names are Slack's own
// (iamcal's emoji-data, as emojibase-data ships them), so a reaction people add comes back as the emoji it shows.
import { createRequire } from 'node:module';

/** Slack writes a skin tone after the name: `+1::skin-tone-3`; tones 2–6 are the modifiers U+1F3FB–U+1F3FF. */
const SKIN_TONES = ['\u{1F3FB}', '\u{1F3FC}', '\u{1F3FD}', '\u{1F3FE}', '\u{1F3FF}'];

interface EmojiTables {
  /** Unicode without variation selectors → Slack's names, the preferred one first. */
  names: Map<string, string[]>;
  /** Any of Slack's names → the Unicode emoji. */
  emoji: Map<string, string>;
}

let tables: EmojiTables | undefined;

const withoutSelectors = (text: string) => text.replace(/\uFE0F/g, '');
const fromHexcode = (hexcode: string) => String.fromCodePoint(...hexcode.split('-').map((hex) => Number.parseInt(hex, 16)));

/** Loaded on first use: the table is ~2,000 entries and only reactions need it. */
function load(): EmojiTables {
  if (tables) return tables;
  const require = createRequire(import.meta.url);
  const shortcodes = require('emojibase-data/en/shortcodes/iamcal.json') as Record<string, string | string[]>;
  const names = new Map<string, string[]>();
  const emoji = new Map<string, string>();
  for (const [hexcode, value] of Object.entries(shortcodes)) {
    const unicode = fromHexcode(hexcode);
    const list = Array.isArray(value) ? value : [value];
    names.set(withoutSelectors(unicode), list);
    for (const name of list) if (!emoji.has(name)) emoji.set(name, unicode);
  }
  tables = { names, emoji };
  return tables;
}

/** Slack's name for a Unicode emoji (`👍` → `+1`, `👍🏽` → `+1::skin-tone-4`), or undefined when Slack has none. */
export function slackEmojiName(unicode: string): string | undefined {
  const { names } = load();
  const bare = withoutSelectors(unicode.trim());
  const direct = names.get(bare)?.[0];
  if (direct) return direct;
  const tone = SKIN_TONES.findIndex((modifier) => bare.includes(modifier));
  if (tone < 0) return undefined;
  const base = names.get(bare.replace(SKIN_TONES[tone], ''))?.[0];
  return base ? `${base}::skin-tone-${tone + 2}` : undefined;
}

/** The Unicode emoji a Slack reaction name stands for (`thumbsup`, `:tada:`, `+1::skin-tone-2`); undefined for custom emoji. */
export function unicodeForSlackName(name: string): string | undefined {
  const { emoji } = load();
  const [base, tone] = name.replace(/^:|:$/g, '').split('::');
  const unicode = emoji.get(base);
  if (!unicode) return undefined;
  const modifier = /^skin-tone-([2-6])$/.exec(tone ?? '')?.[1];
  if (!modifier) return unicode;
  // The modifier goes after the first character of the emoji (the person), before any joiner sequence.
  const [first, ...rest] = [...withoutSelectors(unicode)];
  return [first, SKIN_TONES[Number(modifier) - 2], ...rest].join('');
}
