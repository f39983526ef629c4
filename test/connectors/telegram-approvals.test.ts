// What is approved is what runs: on Telegram, every character of a command under approval is visible, in order,
// whatever Markdown the command holds and wherever the question is split into messages.
import { describe, expect, it } from 'vitest';
import { formatForTelegram, TEXT_LIMIT } from '../../connectors/telegram/format.ts';
import { approvalText, MAX_APPROVAL_TEXT } from '../../src/questions/approvals.ts';
import { questionText } from '../../src/questions/format.ts';
import { showVerbatim } from '../../src/questions/visible.ts';
import { summarizeShellCall } from '../../tools/shell-summary.ts';

/** What a person reads in a part: its HTML without tags, entities unescaped. */
const rendered = (html: string) => html.replace(/<[^>]*>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&amp;/g, '&');

/**
 * Whether `wanted` reads whole and in order across the parts, where the end of one part and the start of the next
 * are either the two halves of a line or two lines.
 */
function readsWhole(parts: string[], wanted: string): boolean {
  const text = parts.join('\u0001');
  const from = (i: number, j: number): boolean => {
    while (j < wanted.length) {
      if (text[i] === '\u0001') return from(i + 1, j) || (wanted[j] === '\n' && from(i + 1, j + 1));
      if (text[i] !== wanted[j]) return false;
      i++;
      j++;
    }
    return true;
  };
  for (let start = text.indexOf(wanted[0]); start >= 0; start = text.indexOf(wanted[0], start + 1)) if (from(start, 0)) return true;
  return false;
}

const filler = (size: number) => {
  const lines: string[] = [];
  for (let used = 0, i = 0; used < size; i++) {
    lines.push(`echo filler line ${i}`);
    used += lines[lines.length - 1].length + 1;
  }
  return lines.join('\n');
};

const hidden = '[a]: x "$(touch /tmp/PWNED)"';
const payloads: string[] = [
  // The reported case: a ``` line inside the ```` fence, then a link reference definition.
  `cat >/dev/null <<'EOF'\n\`\`\`\nEOF\n\n${hidden}\n\necho done`,
  // Inner fences of every length, of both characters, with and without info strings, opened and closed.
  ...[3, 4, 5, 6, 7, 9].flatMap((n) =>
    ['`', '~'].flatMap((c) => [
      `cat <<'EOF'\n${c.repeat(n)}\n${hidden}\n${c.repeat(n)}\nEOF`,
      `cat <<'EOF'\n${c.repeat(n)}sh\n${hidden}\nEOF\n${c.repeat(n + 2)}`,
      `: ${c.repeat(n)}\n${c.repeat(n)} \n${hidden}`,
    ]),
  ),
  '~~~ info `with` ticks\n' + hidden + '\n~~~',
  // Link reference definitions, HTML, entities.
  `${hidden}\n[b]: <y> 'title'\n[c]:\n  z\n[d]\n[a]`,
  `<pre>\n\`\`\`\nrm -rf ~\n\`\`\`\n</pre>`,
  '<!--\nrm -rf ~\n-->\n<details>\n\ncurl x | sh\n</details>\n<script>alert(1)</script>',
  'echo &amp; &lt;b&gt; &#x41; &nbsp; <b>bold</b> <a href="x">y</a>',
  // Emphasis runs, rules, headings, quotes, lists, escapes, indentation.
  'echo **bold** __init__ *a* _b_ ***x*** ___ ~~s~~ `c` ``d``',
  '---\n===\n***\n___\n# heading\n> quote\n- item\n1. one\n+ plus\n| a | b |\n|---|---|\n| c | d |',
  '    indented\n\tTAB\n  two\n\\*not emphasis\\* \\\\ \\`',
  // Long lines, with and without spaces, and characters that markup makes longer.
  'x'.repeat(5000),
  'word '.repeat(1200),
  `echo ${'&'.repeat(2200)}`,
  `echo ${'<>'.repeat(1000)} ${hidden}`,
  '😀'.repeat(2500),
  // Lines of backticks as long as the command's fence would be; runs so long that the fence cannot be repeated.
  '```\n````\n`````\n' + hidden,
  `echo ${'`'.repeat(900)}\n${hidden}`,
  `echo ${'`'.repeat(1100)}\n${hidden}`,
  `${'`'.repeat(2500)}\n${hidden}`,
];

describe('approvals on Telegram', () => {
  it('show every character of the command, in order, in the parts sent, whatever Markdown it holds and wherever it is split', () => {
    let checked = 0;
    for (const payload of payloads) {
      for (const size of [0, 1500, 3900, 3980, 4030, 4060, 4075, 4090, 4110, 6000, 8100]) {
        const command = size ? `${filler(size)}\n${payload}` : payload;
        const cwd = 'app/[a]: x\n```';
        const env = { TARGET: '`[x](http://evil)` *y*', OTHER: '<b>z</b>' };
        const summary = summarizeShellCall({ command, cwd, timeout_ms: 1500, env });
        if (summary.length > MAX_APPROVAL_TEXT) continue;
        const text = questionText({ id: 'ab12cd34ef56gh78ij90kl12', text: approvalText({ persona: 'testy', tool: 'shell_exec', summary }) });
        const parts = formatForTelegram(text);
        for (const part of parts) expect(part.html.length).toBeLessThanOrEqual(TEXT_LIMIT);
        const seen = parts.map((part) => rendered(part.html));
        const where = `payload ${payloads.indexOf(payload)} after ${size} characters`;
        expect(readsWhole(seen, showVerbatim(command)), where).toBe(true);
        expect(readsWhole(seen, `folder:  ${showVerbatim(cwd, { singleLine: true })}\ntimeout: 1.5s`), where).toBe(true);
        expect(readsWhole(seen, 'TARGET=`[x](http://evil)` *y*\nOTHER=<b>z</b>'), where).toBe(true);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(300);
  });
});
