// grep against a catastrophic regular expression: the pattern runs in a worker stopped at a deadline, so one
// pattern cannot freeze the whole Parlor process (every persona, every chat), and a pattern ripgrep does not take
// (look-around) is not handed to an unbounded search either.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { findRipgrep } from '../../src/tools/grep-ripgrep.ts';
import { createGrepTool } from '../../tools/grep.ts';
import { makeFileToolsFixture, runTool } from './file-helpers.ts';

const fixture = makeFileToolsFixture('parlor-attack-redos-');
const { workspace, ctx } = fixture;
const RG = findRipgrep();

// 28 letters and a mismatch: most of a minute of backtracking for (a+)+$ in V8 on a 2-core machine (25: 5 s),
// doubling with each letter added.
const EVIL_LINE = `${'a'.repeat(28)}!`;
// The search gives up on a file after GREP_DEADLINE_MS (2 s), and a worker thread starts first, which can take a
// moment under load: within 5 s is well short of the backtracking's minute, and does not fail on a busy machine.
const ANSWERED_WITHIN_MS = 5_000;
const REFUSED = /^error: the pattern took too long on "evil.txt" \(over 2 s\).*simplify it, or use literal: true/;

beforeEach(() => {
  fs.rmSync(workspace, { recursive: true, force: true });
  fs.mkdirSync(workspace, { recursive: true });
  fs.writeFileSync(path.join(workspace, 'evil.txt'), `${EVIL_LINE}\n`);
});
afterAll(() => fixture.remove());

async function timed(run: () => Promise<string>): Promise<{ out: string; ms: number }> {
  const started = Date.now();
  const out = await run();
  return { out, ms: Date.now() - started };
}

describe('grep with a catastrophic pattern', () => {
  it('the JavaScript search answers (a match or a refusal) within seconds, not after minutes of backtracking', async () => {
    const grep = createGrepTool({ ripgrep: false });
    const { out, ms } = await timed(() => runTool(grep, { pattern: '(a+)+$' }, ctx));
    expect(out).toMatch(REFUSED);
    expect(ms).toBeLessThan(ANSWERED_WITHIN_MS);
  }, 60_000);

  it.skipIf(!RG)('a look-ahead that ripgrep refuses does not hand a catastrophic pattern to the JavaScript search', async () => {
    const grep = createGrepTool({ ripgrep: RG! });
    const { out, ms } = await timed(() => runTool(grep, { pattern: '(?=a)(a+)+$' }, ctx));
    expect(out).toMatch(REFUSED);
    expect(ms).toBeLessThan(ANSWERED_WITHIN_MS);
  }, 60_000);

  it('the same pattern with literal: true is searched for as text, at once', async () => {
    fs.writeFileSync(path.join(workspace, 'notes.txt'), 'the regex (a+)+$ backtracks\n');
    const grep = createGrepTool({ ripgrep: false });
    const { out, ms } = await timed(() => runTool(grep, { pattern: '(a+)+$', literal: true }, ctx));
    expect(out).toBe('notes.txt:1:the regex (a+)+$ backtracks');
    expect(ms).toBeLessThan(1_000);
  });

  it.skipIf(!RG)('ripgrep itself runs the same pattern without the look-ahead in linear time (the defence that holds)', async () => {
    const grep = createGrepTool({ ripgrep: RG! });
    const { out, ms } = await timed(() => runTool(grep, { pattern: '(a+)+$' }, ctx));
    expect(out).toBe(`no matches for "(a+)+$" in your workspace`);
    expect(ms).toBeLessThan(2_000);
  });
});
