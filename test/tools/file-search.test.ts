// list_dir, glob and grep: bounded answers that say when they were cut, and nothing found beyond the workspace.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { findRipgrep } from '../../src/tools/grep-ripgrep.ts';
import { createGlobTool } from '../../tools/glob.ts';
import { createGrepTool } from '../../tools/grep.ts';
import { createListDirTool } from '../../tools/list-dir.ts';
import { makeFileToolsFixture, runTool } from './file-helpers.ts';

const fixture = makeFileToolsFixture('parlor-file-search-');
const { root, workspace, ctx } = fixture;
const outside = path.join(root, 'outside');
const RG = findRipgrep();

function put(relative: string, content: string | Buffer, mtime?: number): void {
  const full = path.join(workspace, relative);
  fs.mkdirSync(path.dirname(full), { recursive: true });
  fs.writeFileSync(full, content);
  if (mtime !== undefined) fs.utimesSync(full, mtime, mtime);
}

beforeEach(() => {
  for (const dir of [workspace, outside]) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
  }
  fs.writeFileSync(path.join(outside, 'leak.txt'), 'needle from outside\n');
  put('notes.md', 'alpha\nneedle one\nbeta\n', 1_000);
  put('docs/guide.txt', 'gamma\nNeedle two\ndelta\n', 3_000);
  put('docs/deep/more.txt', 'needle three\n', 2_000);
  put('.env', 'NEEDLE=secret\n');
  put('docs/.env.local', 'NEEDLE=secret\n');
  put('node_modules/pkg/index.js', 'needle in a package\n');
  put('.git/config', 'needle in git\n');
  fs.symlinkSync(outside, path.join(workspace, 'out-dir'));
  fs.symlinkSync(path.join(outside, 'leak.txt'), path.join(workspace, 'leak-link.txt'));
});
afterAll(() => fixture.remove());

describe('list_dir', () => {
  const list = createListDirTool();

  it('lists type, size and path, sorted, showing symlinks without following them and hiding .env files', async () => {
    expect(await runTool(list, {}, ctx)).toBe(
      [
        'folder         -  .git/',
        'folder         -  docs/',
        `symlink        -  leak-link.txt -> ${path.join(outside, 'leak.txt')}`,
        'folder         -  node_modules/',
        'file        22 B  notes.md',
        `symlink        -  out-dir -> ${outside}`,
        '[1 secrets file(s) (.env*) not shown]',
      ].join('\n'),
    );
  });

  it('goes depth levels down, but not into .git or node_modules', async () => {
    expect(await runTool(list, { depth: 3 }, ctx)).toBe(
      [
        'folder         -  .git/ (not listed further; list_dir it to see inside)',
        'folder         -  docs/',
        'folder         -  docs/deep/',
        'file        13 B  docs/deep/more.txt',
        'file        23 B  docs/guide.txt',
        `symlink        -  leak-link.txt -> ${path.join(outside, 'leak.txt')}`,
        'folder         -  node_modules/ (not listed further; list_dir it to see inside)',
        'file        22 B  notes.md',
        `symlink        -  out-dir -> ${outside}`,
        '[2 secrets file(s) (.env*) not shown]',
      ].join('\n'),
    );
    expect(await runTool(list, { path: 'node_modules', depth: 2 }, ctx)).toBe('folder         -  node_modules/pkg/\nfile        20 B  node_modules/pkg/index.js');
  });

  it('stops at 500 entries and says so', async () => {
    for (let i = 0; i < 600; i++) put(`many/f${String(i).padStart(3, '0')}.txt`, 'x');
    const lines = (await runTool(list, { path: 'many' }, ctx)).split('\n');
    expect(lines).toHaveLength(501);
    expect(lines[499]).toBe('file         1 B  many/f499.txt');
    expect(lines[500]).toBe('[cut at 500 entries; list a folder further down, or use a smaller depth or glob]');
  });

  it('answers a file, an empty folder and a missing one plainly', async () => {
    fs.mkdirSync(path.join(workspace, 'empty'));
    expect(await runTool(list, { path: 'notes.md' }, ctx)).toBe('error: "notes.md" is a file, not a folder; read it with file_read');
    expect(await runTool(list, { path: 'empty' }, ctx)).toBe('"empty" is an empty folder');
    expect(await runTool(list, { path: 'gone' }, ctx)).toBe('error: "gone" does not exist in the workspace');
  });
});

describe('glob', () => {
  const glob = createGlobTool();

  it('finds files by pattern, newest first, never through a symlink out nor a .env file', async () => {
    expect(await runTool(glob, { pattern: '**/*.{txt,md}' }, ctx)).toBe('docs/guide.txt\ndocs/deep/more.txt\nnotes.md');
    expect(await runTool(glob, { pattern: '*.txt', path: 'docs' }, ctx)).toBe('docs/guide.txt');
    expect(await runTool(glob, { pattern: '**/.env*' }, ctx)).toBe('no files match "**/.env*" in your workspace');
  });

  it('lists no symlinks, even to a file inside (ripgrep, behind grep, passes them over too)', async () => {
    fs.symlinkSync('notes.md', path.join(workspace, 'alias.md'));
    expect(await runTool(glob, { pattern: '*.md' }, ctx)).toBe('notes.md');
    expect(await runTool(glob, { pattern: '*.txt' }, ctx)).toBe('no files match "*.txt" in your workspace');
  });

  it('skips .git and node_modules unless the pattern or path names them', async () => {
    expect(await runTool(glob, { pattern: '**/*.js' }, ctx)).toBe('no files match "**/*.js" in your workspace');
    expect(await runTool(glob, { pattern: 'node_modules/**/*.js' }, ctx)).toBe('node_modules/pkg/index.js');
    expect(await runTool(glob, { pattern: '*', path: '.git' }, ctx)).toBe('.git/config');
  });

  it('shows at most 200 files and says how many there were', async () => {
    for (let i = 0; i < 250; i++) put(`many/f${i}.log`, 'x', 10_000 + i);
    const lines = (await runTool(glob, { pattern: 'many/*.log' }, ctx)).split('\n');
    expect(lines).toHaveLength(201);
    expect(lines[0]).toBe('many/f249.log');
    expect(lines[199]).toBe('many/f50.log');
    expect(lines[200]).toBe('[200 of 250 files shown, newest first; narrow the pattern or the path to see the rest]');
  });

  it('refuses patterns that climb out or are absolute elsewhere; takes an absolute one inside', async () => {
    expect(await runTool(glob, { pattern: '../**' }, ctx)).toBe('error: the pattern "../**" has a ".." segment; patterns stay inside the folder searched');
    expect(await runTool(glob, { pattern: 'docs/../../*' }, ctx)).toMatch(/^error: the pattern "docs\/\.\.\/\.\.\/\*" has a "\.\." segment/);
    expect(await runTool(glob, { pattern: `${outside}/*.txt` }, ctx)).toBe(`error: the pattern "${outside}/*.txt" is outside the workspace; give it relative to your workspace`);
    expect(await runTool(glob, { pattern: `${workspace}/docs/*.txt` }, ctx)).toBe('docs/guide.txt');
  });
});

const engines: [string, string | false | undefined][] = [
  ['grep in JavaScript', false],
  ['grep with ripgrep (only where rg is on PATH)', RG],
];

describe.each(engines)('%s', (_name, ripgrep) => {
  // The ripgrep case needs rg installed; CI may not have it, and the JavaScript search is the one that runs there.
  const skip = ripgrep === undefined;
  const grep = createGrepTool({ ripgrep: ripgrep ?? false });

  it.skipIf(skip)('finds matching lines as path:line:text, in path order, nowhere outside, never in .env, .git or node_modules', async () => {
    expect(await runTool(grep, { pattern: 'needle' }, ctx)).toBe('docs/deep/more.txt:1:needle three\nnotes.md:2:needle one');
  });

  it.skipIf(skip)('ignores case on request, and searches .git or node_modules when the path leads there', async () => {
    expect(await runTool(grep, { pattern: 'needle', ignore_case: true }, ctx)).toBe('docs/deep/more.txt:1:needle three\ndocs/guide.txt:2:Needle two\nnotes.md:2:needle one');
    expect(await runTool(grep, { pattern: 'needle', path: 'node_modules' }, ctx)).toBe('node_modules/pkg/index.js:1:needle in a package');
  });

  it.skipIf(skip)('takes the pattern as a regular expression, or as text with literal', async () => {
    put('sym.txt', 'a.c\nabc\n');
    expect(await runTool(grep, { pattern: 'a.c', path: 'sym.txt' }, ctx)).toBe('sym.txt:1:a.c\nsym.txt:2:abc');
    expect(await runTool(grep, { pattern: 'a.c', path: 'sym.txt', literal: true }, ctx)).toBe('sym.txt:1:a.c');
    expect(await runTool(grep, { pattern: '^ne+dle (one|three)$' }, ctx)).toBe('docs/deep/more.txt:1:needle three\nnotes.md:2:needle one');
  });

  it.skipIf(skip)('limits the files to an include glob', async () => {
    expect(await runTool(grep, { pattern: 'needle', include: '*.md' }, ctx)).toBe('notes.md:2:needle one');
    expect(await runTool(grep, { pattern: 'eedle', include: 'deep/*.txt', path: 'docs' }, ctx)).toBe('docs/deep/more.txt:1:needle three');
  });

  it.skipIf(skip)('shows context lines around matches, groups apart', async () => {
    put('ctx.txt', ['one', 'two', 'hit A', 'four', 'five', 'six', 'seven', 'hit B', 'nine'].join('\n'));
    expect(await runTool(grep, { pattern: 'hit', path: 'ctx.txt', context: 1 }, ctx)).toBe('ctx.txt-2-two\nctx.txt:3:hit A\nctx.txt-4-four\n--\nctx.txt-7-seven\nctx.txt:8:hit B\nctx.txt-9-nine');
    expect(await runTool(grep, { pattern: 'hit', path: 'ctx.txt', context: 3 }, ctx)).toBe(
      'ctx.txt-1-one\nctx.txt-2-two\nctx.txt:3:hit A\nctx.txt-4-four\nctx.txt-5-five\nctx.txt-6-six\nctx.txt-7-seven\nctx.txt:8:hit B\nctx.txt-9-nine',
    );
  });

  it.skipIf(skip)('stops at max_results and says there are more', async () => {
    put('many.txt', Array.from({ length: 300 }, (_, i) => `match ${i + 1}`).join('\n'));
    const lines = (await runTool(grep, { pattern: 'match', path: 'many.txt' }, ctx)).split('\n');
    expect(lines).toHaveLength(101);
    expect(lines[99]).toBe('many.txt:100:match 100');
    expect(lines[100]).toBe('[the first 100 matching lines shown, there are more; narrow the pattern, the path or include, or raise max_results (up to 500)]');
    expect((await runTool(grep, { pattern: 'match', path: 'many.txt', max_results: 3 }, ctx)).split('\n')).toHaveLength(4);
    expect(await runTool(grep, { pattern: 'match 300', path: 'many.txt', max_results: 1 }, ctx)).toBe('many.txt:300:match 300');
  });

  it.skipIf(skip)('passes over binary files, and says when nothing matched', async () => {
    put('blob.bin', Buffer.concat([Buffer.from('needle '), Buffer.from([0, 1, 2]), Buffer.from(' needle\n')]));
    expect(await runTool(grep, { pattern: 'needle', include: '*.bin' }, ctx)).toBe('no matches for "needle" in your workspace');
  });

  it.skipIf(skip)('answers an invalid regular expression clearly', async () => {
    expect(await runTool(grep, { pattern: 'foo(' }, ctx)).toMatch(/^error: "foo\(" is not a valid regular expression \(.+\); fix it, or set literal: true to search for the text as it is$/);
    expect(await runTool(grep, { pattern: 'foo(', literal: true }, ctx)).toBe('no matches for "foo(" in your workspace');
  });

  it.skipIf(skip)('refuses a path out of the workspace and an include that climbs out', async () => {
    expect(await runTool(grep, { pattern: 'needle', path: 'out-dir' }, ctx)).toBe('error: "out-dir" leads outside the workspace');
    expect(await runTool(grep, { pattern: 'needle', include: '../*.txt' }, ctx)).toMatch(/^error: include is a glob relative to the folder searched/);
  });
});

describe('grep, whichever search runs', () => {
  it.skipIf(!RG)('answers the same with ripgrep as in JavaScript (needs rg on PATH)', async () => {
    put('ctx.txt', ['one', 'Hit A', 'three', 'hit B', 'five'].join('\n'));
    put('docs/a/b.txt', 'hit inside\n');
    put('docs/a.txt', 'hit beside\n');
    const js = createGrepTool({ ripgrep: false });
    const rg = createGrepTool({ ripgrep: RG });
    const queries = [
      { pattern: 'hit' },
      { pattern: 'hit', ignore_case: true, context: 1 },
      { pattern: 'h.t', literal: true },
      { pattern: 'hit', include: '*.txt', path: 'docs' },
      { pattern: 'hit', max_results: 2, context: 2 },
      { pattern: 'needle|hit', ignore_case: true },
    ];
    for (const query of queries) expect(await runTool(rg, query, ctx), JSON.stringify(query)).toBe(await runTool(js, query, ctx));
  });
});

describe('while a command swaps a folder for a symlink out, in a loop', () => {
  it('grep and glob never show what is outside', async () => {
    put('d/inside.txt', 'needle from inside\n');
    const swapper = spawn('/bin/sh', ['-c', `cd '${workspace}' && while :; do mv d d2 && ln -s '${outside}' d && rm d && mv d2 d; done`], { stdio: 'ignore', detached: true });
    const gone = new Promise((resolve) => swapper.once('exit', resolve));
    try {
      const tools = [createGrepTool({ ripgrep: false }), ...(RG ? [createGrepTool({ ripgrep: RG })] : []), createGlobTool()];
      for (let round = 0; round < 30; round++) {
        for (const tool of tools) {
          const result = await runTool(tool, tool.name === 'glob' ? { pattern: '**/*.txt' } : { pattern: 'needle' }, ctx);
          expect(result).not.toContain('from outside');
          expect(result).not.toMatch(/(^|\/)leak\.txt/m);
        }
      }
    } finally {
      // The whole group: a mv the loop started must not go on renaming in the folder the next test clears.
      process.kill(-swapper.pid!, 'SIGKILL');
      await gone;
    }
  });
});
