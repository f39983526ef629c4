// shell_exec's approval summary: the whole call in code blocks, so nothing of it is read as Markdown.
import { describe, expect, it } from 'vitest';
import { markdownToTelegramHtml } from '../../connectors/telegram/format.ts';
import { summarizeShellCall } from '../../tools/shell-summary.ts';

describe('summarizeShellCall', () => {
  it('puts the folder and timeout in a code block too, so Markdown in the folder shows as written', () => {
    const summary = summarizeShellCall({ command: 'make', cwd: '*build*/[docs](http://evil)/_x_', timeout_ms: 90_000 });
    expect(summary).toBe('```\nmake\n```\nwith:\n```\nfolder:  *build*/[docs](http://evil)/_x_\ntimeout: 90s\n```');
    expect(markdownToTelegramHtml(summary)).toContain('<pre><code>folder:  *build*/[docs](http://evil)/_x_\ntimeout: 90s</code></pre>');
  });

  it('fences the details with more backticks than they hold, and writes out what the folder hides', () => {
    const summary = summarizeShellCall({ command: 'ls', cwd: 'a```b\u200B\nc' });
    expect(summary).toBe('```\nls\n```\nwith:\n````\nfolder:  a```b⟨U+200B⟩⟨LF⟩c\n````');
  });

  it('shows variables after the folder and timeout, names and values in a code block', () => {
    expect(summarizeShellCall({ command: 'npm test', cwd: 'app', timeout_ms: 120_000, env: { CI: '1', NPM_TOKEN: '$NPM_TOKEN' } })).toBe(
      '```\nnpm test\n```\nwith:\n```\nfolder:  app\ntimeout: 120s\n```\nand these variables:\n```\nCI=1\nNPM_TOKEN=$NPM_TOKEN\n```',
    );
    expect(summarizeShellCall({ command: 'env', env: { 'A\u202EB': '`x`' } })).toBe('```\nenv\n```\nwith these variables:\n```\nA⟨U+202E⟩B=`x`\n```');
  });
});
