import { describe, expect, it } from 'vitest';
import type { Update } from 'grammy/types';
import { boundNesting, formatForTelegram, markdownToTelegramHtml, splitText } from '../../connectors/telegram/format.ts';
import { normalizeUpdate } from '../../connectors/telegram/normalize.ts';

const bot = { id: 42, username: 'parlor_bot' };
const from = { id: 7, is_bot: false, first_name: 'Ana', last_name: 'Lima', username: 'ana' };
const groupMessage = (text: string, extra: Record<string, unknown> = {}) =>
  ({ update_id: 1, message: { message_id: 9, date: 0, chat: { id: -100, type: 'supergroup', title: 'Team' }, from, text, ...extra } }) as unknown as Update;

describe('normalizeUpdate', () => {
  it('uses the update id as the dedupe key and maps a DM', () => {
    const event = normalizeUpdate({ update_id: 77, message: { message_id: 3, date: 0, chat: { id: 7, type: 'private', first_name: 'Ana' }, from, text: 'hi' } } as Update, bot);
    expect(event).toMatchObject({ connector: 'telegram', externalId: '77', kind: 'message', chat: { id: '7', type: 'dm' }, sender: { id: '7', name: 'Ana Lima' }, text: 'hi', messageId: '3' });
  });

  it('counts a mention entity of the bot, a text mention, or a command addressed to it — never a substring', () => {
    expect(normalizeUpdate(groupMessage('@parlor_bot hi', { entities: [{ type: 'mention', offset: 0, length: 11 }] }), bot)?.mentioned).toBe(true);
    expect(normalizeUpdate(groupMessage('@parlor_botty hi', { entities: [{ type: 'mention', offset: 0, length: 13 }] }), bot)?.mentioned).toBe(false);
    expect(normalizeUpdate(groupMessage('hey parlor_bot and @parlor_bot_fan'), bot)?.mentioned).toBe(false);
    expect(normalizeUpdate(groupMessage('Bot, hi', { entities: [{ type: 'text_mention', offset: 0, length: 3, user: { id: 42, is_bot: true, first_name: 'P' } }] }), bot)?.mentioned).toBe(true);
    expect(normalizeUpdate(groupMessage('/status@parlor_bot', { entities: [{ type: 'bot_command', offset: 0, length: 18 }] }), bot)?.mentioned).toBe(true);
    expect(normalizeUpdate(groupMessage('/status@other_bot', { entities: [{ type: 'bot_command', offset: 0, length: 17 }] }), bot)).toBeUndefined();
  });

  it('hands the core a command addressed to this bot without its @name, and leaves commands for other bots alone', () => {
    expect(normalizeUpdate(groupMessage('/status@parlor_bot', { entities: [{ type: 'bot_command', offset: 0, length: 18 }] }), bot)?.text).toBe('/status');
    expect(normalizeUpdate(groupMessage('/think@Parlor_Bot on', { entities: [{ type: 'bot_command', offset: 0, length: 17 }] }), bot)?.text).toBe('/think on');
    expect(normalizeUpdate(groupMessage('/status', { entities: [{ type: 'bot_command', offset: 0, length: 7 }] }), bot)?.text).toBe('/status');
  });

  it('sees a reply to the bot, keeps forum topics apart, and marks edits', () => {
    expect(normalizeUpdate(groupMessage('yes', { reply_to_message: { message_id: 1, date: 0, chat: { id: -100, type: 'supergroup' }, from: { id: 42, is_bot: true, first_name: 'P' } } }), bot)?.replyToBot).toBe(true);
    expect(normalizeUpdate(groupMessage('in topic', { is_topic_message: true, message_thread_id: 12 }), bot)?.chat.thread).toBe('12');
    expect(normalizeUpdate(groupMessage('reply in general', { message_thread_id: 12 }), bot)?.chat.thread).toBeUndefined();
    const edited = { update_id: 2, edited_message: { message_id: 9, date: 0, edit_date: 1, chat: { id: 7, type: 'private', first_name: 'Ana' }, from, text: 'fixed' } } as Update;
    expect(normalizeUpdate(edited, bot)).toMatchObject({ kind: 'edit', text: 'fixed' });
  });

  it('turns a click without a message (inline mode) into a click in the clicker\'s private chat', () => {
    const click = normalizeUpdate({ update_id: 5, callback_query: { id: 'cb', from, chat_instance: 'c', inline_message_id: 'AAA', data: 'q:abc:yes' } } as Update, bot);
    expect(click).toMatchObject({ kind: 'click', externalId: '5', chat: { id: '7', type: 'dm' }, sender: { id: '7' }, data: 'q:abc:yes' });
    expect(click?.messageId).toBeUndefined();
  });

  it('records attachments with their captions', () => {
    const photo = normalizeUpdate(groupMessage('', { text: undefined, caption: 'look', photo: [{ file_id: 'small', file_unique_id: 's', width: 1, height: 1 }, { file_id: 'big', file_unique_id: 'b', width: 9, height: 9, file_size: 900 }] }), bot);
    expect(photo).toMatchObject({ text: 'look', attachments: [{ type: 'photo', fileId: 'big', size: 900 }] });
  });
});

describe('formatting', () => {
  it('converts Markdown to the HTML Telegram accepts and escapes everything else', () => {
    expect(markdownToTelegramHtml('**a** _b_ ~~c~~ `x<y` [l](https://e.x/?a=1&b=2)')).toBe(
      '<b>a</b> <i>b</i> <s>c</s> <code>x&lt;y</code> <a href="https://e.x/?a=1&amp;b=2">l</a>',
    );
    expect(markdownToTelegramHtml('```ts\nif (a < b) {}\n```')).toBe('<pre><code class="language-ts">if (a &lt; b) {}</code></pre>');
    expect(markdownToTelegramHtml('- one\n- two')).toBe('• one\n• two');
    expect(markdownToTelegramHtml('<script>x</script>')).toBe('&lt;script&gt;x&lt;/script&gt;');
  });

  it('splits on paragraphs, then lines, then hard, losing nothing', () => {
    const paragraphs = ['a'.repeat(3000), 'b'.repeat(3000), 'c'.repeat(3000)].join('\n\n');
    expect(splitText(paragraphs, 4096)).toEqual(['a'.repeat(3000), 'b'.repeat(3000), 'c'.repeat(3000)]);
    const hard = 'x'.repeat(9000);
    expect(splitText(hard, 4096).join('')).toBe(hard);
    expect(splitText('😀'.repeat(3000), 4096).every((p) => !/^[\uDC00-\uDFFF]/.test(p))).toBe(true);
  });

  it('keeps code fences balanced across a split and every part within the limit after markup', () => {
    const code = '```\n' + 'line of code\n'.repeat(600) + '```';
    const parts = formatForTelegram(code);
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) {
      expect(p.html.length).toBeLessThanOrEqual(4096);
      expect(p.html.startsWith('<pre><code>')).toBe(true);
    }
    const stars = '**x** '.repeat(1500);
    expect(formatForTelegram(stars).every((p) => p.html.length <= 4096)).toBe(true);
  });

  it('bounds nesting before parsing, keeping the text, and never puts a quote inside a quote', () => {
    expect(boundNesting(`${'> '.repeat(5000)}deep`)).toBe(`${'> '.repeat(8)}deep`);
    expect(boundNesting(`${'- '.repeat(3000)}x`)).toBe(`${'- '.repeat(8)}x`);
    expect(boundNesting('> > quoted twice\n- a list\n```\n> > > > > > > > > > in code\n```')).toBe('> > quoted twice\n- a list\n```\n> > > > > > > > > > in code\n```');
    expect(markdownToTelegramHtml(`${'> '.repeat(5000)}deep`)).toBe('<blockquote>deep</blockquote>');
    expect(markdownToTelegramHtml('> outer\n> > inner\n> > > innermost')).toBe('<blockquote>outer\n\ninner\n\ninnermost</blockquote>');
  });

  it('sends no empty part when a split falls on the end of a code block', () => {
    const code = '```\n' + 'line of code\n'.repeat(600) + '```';
    const parts = formatForTelegram(code);
    expect(parts.every((p) => p.html.replace(/<[^>]+>/g, '').trim().length > 0)).toBe(true);
    expect(parts.map((p) => p.plain).join('\n').match(/line of code/g)).toHaveLength(600);
  });

  it('reads a ``` line inside a ```` block as code, and reopens a split block with its own fence and info string', () => {
    const code = `${'echo filler\n'.repeat(400)}\`\`\`\n[a]: x "$(touch /tmp/PWNED)"\n~~~~\nlast line`;
    const pieces = splitText(`\`\`\`\`sh\n${code}\n\`\`\`\``, 4096);
    expect(pieces.length).toBeGreaterThan(1);
    for (const piece of pieces) {
      expect(piece.startsWith('````sh\n')).toBe(true);
      expect(piece.endsWith('\n````')).toBe(true);
    }
    // The code, piece after piece, is the code: nothing added, nothing lost.
    expect(pieces.map((p) => p.slice('````sh\n'.length, -'\n````'.length)).join('\n')).toBe(code);
    const last = formatForTelegram(`\`\`\`\`sh\n${code}\n\`\`\`\``).at(-1)!.html;
    expect(last).toContain('```\n[a]: x "$(touch /tmp/PWNED)"\n~~~~\nlast line</code></pre>');
  });

  it('closes a fence only with the same character, at least as long, alone on its line', () => {
    const code = ['~~~', '``` x', '````', ' `````', '~~~~ info', 'end'].join('\n');
    expect(markdownToTelegramHtml(`~~~~\n${code}\n~~~~`)).toBe(`<pre><code>${code}</code></pre>`);
    const pieces = splitText(`~~~~\n${`${code}\n`.repeat(200)}~~~~\nafter`, 1000);
    expect(pieces.slice(0, -1).every((p) => p.startsWith('~~~~\n') && p.endsWith('\n~~~~'))).toBe(true);
    expect(pieces.at(-1)!.endsWith('after')).toBe(true);
  });

  it("cuts before a fence's opening line, never in it or just after it, and cuts a long line of code inside the block", () => {
    const opening = `\`\`\`\`sh ${'title '.repeat(30)}`;
    const pieces = splitText(`${'x'.repeat(500)}\n${opening}\n${'y'.repeat(3000)}\n\`\`\`\``, 1000);
    expect(pieces[0]).toBe('x'.repeat(500));
    for (const piece of pieces.slice(1)) expect(piece.startsWith(`${opening}\n`) && piece.endsWith('\n````')).toBe(true);
    expect(pieces.slice(1).map((p) => p.slice(opening.length + 1, -5)).join('')).toBe('y'.repeat(3000));
  });

  it('leaves the lines of a code block alone when bounding nesting, whatever shorter fence lines it holds', () => {
    const deep = '> '.repeat(12) + 'x';
    expect(boundNesting(`\`\`\`\`\n\`\`\`\n${deep}\n\`\`\`\`\n${deep}`)).toBe(`\`\`\`\`\n\`\`\`\n${deep}\n\`\`\`\`\n${'> '.repeat(8)}x`);
  });

  it('sends as written a block whose fence is too long to repeat in every part, losing nothing', () => {
    const fence = '`'.repeat(1200);
    const text = `${fence}\n${'code line\n'.repeat(700)}${fence}`;
    const parts = formatForTelegram(text);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.every((p) => p.html.length <= 4096 && p.html === p.plain)).toBe(true);
    expect(parts.map((p) => p.plain).join('\n')).toBe(text);
  });

  it('sends a part as written when the parser would not show its code block as code', () => {
    // An HTML block takes the fence and ends at the blank line: the definition after it would be read as Markdown and
    // vanish, so the part goes out as it is.
    const text = '<details>\n```\nline\n\n[a]: x "$(touch /tmp/PWNED)"\n```\n</details>';
    expect(formatForTelegram(text)).toEqual([{ html: text.replace(/</g, '&lt;').replace(/>/g, '&gt;'), plain: text }]);
  });

  it('keeps the lines of code in a list item as written', () => {
    expect(markdownToTelegramHtml('- a\n  ```\n  one\n  two\n  ```\n- b')).toBe('• a<pre><code>one\ntwo</code></pre>\n• b');
  });
});

