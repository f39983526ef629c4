// Markdown → mrkdwn through marked, the split under Slack's limits, Block Kit questions within Slack's limits, the
// emoji names both ways, and what the model reads of a person's message.
import { describe, expect, it } from 'vitest';
import { slackEmojiName, unicodeForSlackName } from '../../connectors/slack/emoji.ts';
import { formatForSlack, markdownToMrkdwn, SECTION_LIMIT, TEXT_LIMIT } from '../../connectors/slack/format.ts';
import { questionBlocks } from '../../connectors/slack/blocks.ts';
import { normalizeClick, normalizeEvent, type SlackBot } from '../../connectors/slack/normalize.ts';
import { blockProblems } from '../support/fake-slack-payloads.ts';

describe('Markdown to mrkdwn', () => {
  const table: [string, string, string][] = [
    ['bold', '**Bold** and __also__', '*Bold* and *also*'],
    ['italic', '*it* and _it_', '_it_ and _it_'],
    ['strike', '~~gone~~', '~gone~'],
    ['inline code, escaped inside', 'run `a < b && c`', 'run `a &lt; b &amp;&amp; c`'],
    ['code block without its language', '```js\nif (a < b) {}\n```', '```\nif (a &lt; b) {}\n```'],
    ['link with a label', '[the docs](https://example.com/a?b=1)', '<https://example.com/a?b=1|the docs>'],
    ['bare URL', 'see https://example.com', 'see <https://example.com>'],
    ['autolink', '<https://example.com>', '<https://example.com>'],
    ['a label holding | and >', '[a|b>c](https://example.com)', '<https://example.com|a¦b&gt;c>'],
    ['a link to something not on the web stays its label', '[click](javascript:alert(1))', 'click'],
    ['& < > escaped', 'Tom & Jerry <3 > 2', 'Tom &amp; Jerry &lt;3 &gt; 2'],
    ['user, channel and special mentions kept', 'ask <@U024BE7LH> in <#C0TEAM|team>, <!here>', 'ask <@U024BE7LH> in <#C0TEAM|team>, <!here>'],
    ['HTML is shown, not run', '<b>bold</b>', '&lt;b&gt;bold&lt;/b&gt;'],
    ['heading becomes a bold line', '# Title\n\ntext', '*Title*\n\ntext'],
    ['bullets', '- one\n- two', '• one\n• two'],
    ['numbered list keeps its start', '3. c\n4. d', '3. c\n4. d'],
    ['nested list indented', '- one\n  - inner', '• one\n    • inner'],
    ['quote', '> wise words\n> more', '> wise words\n> more'],
    ['table degrades to aligned lines in a code block', '| a | bb |\n|---|---|\n| 1 | 2 |', '```\na | bb\n--|---\n1 | 2\n```'],
    ['task list', '- [x] done\n- [ ] todo', '• ☑ done\n• ☐ todo'],
    ['image becomes a link', '![chart](https://example.com/c.png)', '<https://example.com/c.png|chart>'],
    ['identifiers keep their underscores', 'record_step ran', 'record_step ran'],
  ];
  for (const [what, markdown, mrkdwn] of table) {
    it(what, () => expect(markdownToMrkdwn(markdown)).toBe(mrkdwn));
  }
});

describe('splitting under Slack’s limits', () => {
  it('keeps every part under 4,000 characters once converted, nothing lost, code fences balanced', () => {
    const code = '```\n' + Array.from({ length: 400 }, (_, i) => `line ${i} & more`).join('\n') + '\n```';
    const prose = Array.from({ length: 60 }, (_, i) => `Paragraph ${i} with **bold** & <angles>.`).join('\n\n');
    const parts = formatForSlack(`${prose}\n\n${code}`);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      expect(part.mrkdwn.length).toBeLessThanOrEqual(TEXT_LIMIT);
      expect((part.mrkdwn.match(/```/g) ?? []).length % 2).toBe(0);
    }
    const joined = parts.map((p) => p.mrkdwn).join('\n');
    expect(joined).toContain('Paragraph 59 with *bold* &amp; &lt;angles&gt;.');
    expect(joined).toContain('line 399 &amp; more');
  });

  it('escaping that lengthens a piece (& → &amp;) still fits', () => {
    const parts = formatForSlack('&'.repeat(9000));
    for (const part of parts) expect(part.mrkdwn.length).toBeLessThanOrEqual(TEXT_LIMIT);
    expect(parts.map((p) => p.mrkdwn).join('').length).toBe(9000 * 5);
  });
});

describe('Block Kit questions', () => {
  it('a section and an actions block per row that Slack accepts, values carrying the payload', () => {
    const blocks = questionBlocks('Run *this*?', [[{ label: 'Allow once', data: 'q:abc:1' }, { label: 'Deny', data: 'q:abc:3' }], [{ label: 'x'.repeat(100), data: 'q:abc:4' }]]);
    expect(blockProblems(blocks)).toEqual([]);
    expect(blocks[0]).toEqual({ type: 'section', text: { type: 'mrkdwn', text: 'Run *this*?' } });
    const elements = (blocks[1] as any).elements;
    expect(elements.map((e: any) => [e.text.text, e.value])).toEqual([['Allow once', 'q:abc:1'], ['Deny', 'q:abc:3']]);
    const long = (blocks[2] as any).elements[0].text.text as string;
    expect(long.length).toBe(75);
    const ids = [...elements, ...(blocks[2] as any).elements].map((e: any) => e.action_id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('a payload over Slack’s 2,000 characters is a programming error, not a silent cut', () => {
    expect(() => questionBlocks('?', [[{ label: 'a', data: 'q:' + 'x'.repeat(2000) }]])).toThrow(/2,000/);
  });

  it('the section limit is 3,000', () => expect(SECTION_LIMIT).toBe(3000));
});

describe('emoji names', () => {
  const pairs: [string, string][] = [
    ['👍', '+1'],
    ['❤', 'heart'],
    ['🎉', 'tada'],
    ['✅', 'white_check_mark'],
    ['👀', 'eyes'],
    ['🧑‍💻', 'technologist'],
    ['❤️‍🔥', 'heart_on_fire'],
  ];
  for (const [unicode, name] of pairs) {
    it(`${unicode} ↔ ${name}`, () => {
      expect(slackEmojiName(unicode)).toBe(name);
      expect(unicodeForSlackName(name)?.replace(/\uFE0F/g, '')).toBe(unicode.replace(/\uFE0F/g, ''));
    });
  }

  it('variation selectors, aliases, colons and skin tones', () => {
    expect(slackEmojiName('❤️')).toBe('heart');
    expect(unicodeForSlackName('thumbsup')).toBe('👍');
    expect(unicodeForSlackName(':tada:')).toBe('🎉');
    expect(slackEmojiName('👍🏽')).toBe('+1::skin-tone-4');
    expect(unicodeForSlackName('+1::skin-tone-4')).toBe('👍🏽');
  });

  it('no name for what is not an emoji, no Unicode for a custom emoji', () => {
    expect(slackEmojiName('x')).toBeUndefined();
    expect(slackEmojiName(':thumbsup:')).toBeUndefined();
    expect(unicodeForSlackName('partyparrot')).toBeUndefined();
  });
});

describe('what the core gets of a Slack event', () => {
  const bot: SlackBot = { userId: 'U0BOT', botId: 'B0BOT', name: 'parlor' };

  it('a mention: the addressing mention dropped, entities and links decoded, others’ mentions kept, a thread on it', () => {
    const event = normalizeEvent(
      { type: 'app_mention', channel: 'C0TEAM', user: 'U1', ts: '1.000100', text: '<@U0BOT> ask <@U2> about &lt;this&gt; &amp; <https://x.io|x.io> or <https://y.io|docs>' },
      'Ev1',
      bot,
    );
    expect(event).toMatchObject({ externalId: 'C0TEAM:1.000100', kind: 'message', chat: { id: 'C0TEAM', type: 'group', thread: '1.000100' }, mentioned: true });
    expect(event?.text).toBe('ask <@U2> about <this> & x.io (https://x.io) or docs (https://y.io)');
  });

  it('a post that is not a mention stays where it is, not mentioned; a DM is a dm', () => {
    expect(normalizeEvent({ type: 'message', channel: 'C0TEAM', channel_type: 'channel', user: 'U1', ts: '2.0', text: 'hi all <!channel>' }, 'Ev2', bot)).toMatchObject({
      chat: { id: 'C0TEAM', type: 'group', thread: undefined },
      mentioned: false,
    });
    expect(normalizeEvent({ type: 'message', channel: 'D0U1', channel_type: 'im', user: 'U1', ts: '3.0', text: 'hi' }, 'Ev3', bot)).toMatchObject({ chat: { id: 'D0U1', type: 'dm' }, mentioned: undefined });
  });

  it('a post in a thread the bot started is a reply to it', () => {
    expect(normalizeEvent({ type: 'message', channel: 'C0TEAM', channel_type: 'channel', user: 'U1', ts: '5.0', thread_ts: '4.0', parent_user_id: 'U0BOT', text: 'thanks' }, 'Ev4', bot)).toMatchObject({
      chat: { thread: '4.0' },
      replyToBot: true,
    });
  });

  it('joins, topic changes and bots are nothing', () => {
    for (const event of [
      { type: 'message', subtype: 'channel_join', channel: 'C0TEAM', user: 'U1', ts: '6.0', text: 'joined' },
      { type: 'message', channel: 'C0TEAM', user: 'U0BOT', ts: '6.1', text: 'mine' },
      { type: 'message', channel: 'C0TEAM', user: 'U9', bot_id: 'B9', ts: '6.2', text: 'another bot' },
      { type: 'message', subtype: 'message_deleted', channel: 'C0TEAM', ts: '6.3', deleted_ts: '6.0' },
    ]) {
      expect(normalizeEvent(event, 'Ev5', bot)).toBeUndefined();
    }
  });

  it('a click carries the button’s value and where it was clicked', () => {
    const body = { user: { id: 'U1', username: 'ana', name: 'ana' }, channel: { id: 'C0TEAM' }, container: { message_ts: '7.0', thread_ts: '6.0', channel_id: 'C0TEAM' }, trigger_id: 't' };
    expect(normalizeClick(body, { value: 'q:abc:1', action_ts: '8.0' })).toMatchObject({
      kind: 'click',
      chat: { id: 'C0TEAM', type: 'group', thread: '6.0' },
      sender: { id: 'U1', username: 'ana' },
      messageId: '7.0',
      data: 'q:abc:1',
    });
  });
});
