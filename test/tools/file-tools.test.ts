// file_read, file_write and file_edit as the model uses them: what each answers, and what ends up on disk.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { placeWorkspaceFile } from '../../src/tools/workspace-io.ts';
import { createFileEditTool } from '../../tools/file-edit.ts';
import { createFileReadTool } from '../../tools/file-read.ts';
import { createFileWriteTool } from '../../tools/file-write.ts';
import { makeFileToolsFixture, runTool } from './file-helpers.ts';
import { minimalPdf } from './pdf-fixture.ts';

const fixture = makeFileToolsFixture('parlor-file-tools-');
const { workspace, ctx } = fixture;
const read = createFileReadTool();
const write = createFileWriteTool();
const edit = createFileEditTool();
const file = (name: string) => path.join(workspace, name);
const numbered = (from: number, to: number, text = (n: number) => `line ${n}`) =>
  Array.from({ length: to - from + 1 }, (_, i) => `${String(from + i).padStart(6)}\t${text(from + i)}`).join('\n');

beforeEach(() => {
  fs.rmSync(workspace, { recursive: true, force: true });
  fs.mkdirSync(workspace, { recursive: true });
});
afterAll(() => fixture.remove());

describe('file_read', () => {
  it('numbers the lines from 1, like cat -n', async () => {
    fs.writeFileSync(file('a.txt'), 'first\nsecond\n\tindented\n');
    expect(await runTool(read, { path: 'a.txt' }, ctx)).toBe('     1\tfirst\n     2\tsecond\n     3\t\tindented');
  });

  it('shows limit lines from offset, and says how to read on', async () => {
    fs.writeFileSync(file('ten.txt'), Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join('\n'));
    expect(await runTool(read, { path: 'ten.txt', offset: 3, limit: 2 }, ctx)).toBe(`${numbered(3, 4)}\n[lines 3-4 of 10; call file_read with offset 5 to read on]`);
    expect(await runTool(read, { path: 'ten.txt', offset: 9 }, ctx)).toBe(numbered(9, 10));
    expect(await runTool(read, { path: 'ten.txt', offset: 11 }, ctx)).toBe('error: offset 11 is past the end of "ten.txt", which has 10 lines; call file_read with a smaller offset');
  });

  it('shows 400 lines by default, then names the next offset', async () => {
    fs.writeFileSync(file('long.txt'), `${Array.from({ length: 1000 }, (_, i) => `line ${i + 1}`).join('\n')}\n`);
    expect(await runTool(read, { path: 'long.txt' }, ctx)).toBe(`${numbered(1, 400)}\n[lines 1-400 of 1000; call file_read with offset 401 to read on]`);
    expect(await runTool(read, { path: 'long.txt', offset: 401 }, ctx)).toBe(`${numbered(401, 800)}\n[lines 401-800 of 1000; call file_read with offset 801 to read on]`);
  });

  it('stops before the runner would cut the result, at a whole line, and names the next offset', async () => {
    const wide = (n: number) => `${n}:${'x'.repeat(200)}`;
    fs.writeFileSync(file('wide.txt'), Array.from({ length: 400 }, (_, i) => wide(i + 1)).join('\n'));
    const result = await runTool(read, { path: 'wide.txt' }, ctx);
    expect(result.length).toBeLessThan(32_000);
    const shown = result.split('\n').length - 1;
    expect(shown).toBeLessThan(400);
    expect(result).toBe(`${numbered(1, shown, wide)}\n[lines 1-${shown} of 400; call file_read with offset ${shown + 1} to read on]`);
  });

  it('cuts a long line, saying how much is left out', async () => {
    fs.writeFileSync(file('one.txt'), `${'y'.repeat(5000)}\nshort\n`);
    expect(await runTool(read, { path: 'one.txt' }, ctx)).toBe(`     1\t${'y'.repeat(1000)}… [4000 more characters in this line]\n     2\tshort`);
  });

  it('says an empty file is empty', async () => {
    fs.writeFileSync(file('empty.txt'), '');
    expect(await runTool(read, { path: 'empty.txt' }, ctx)).toBe('"empty.txt" is empty (0 bytes)');
  });

  it('refuses binary files (a NUL byte, or bytes that are not UTF-8), never showing bytes', async () => {
    fs.writeFileSync(file('image.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x02]));
    fs.writeFileSync(file('latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    expect(await runTool(read, { path: 'image.png' }, ctx)).toBe(
      'error: "image.png" is a binary file (7 bytes), not text; file_read shows text files and PDFs only. Look at it with shell_exec (file, xxd | head) or send it on with send_message.',
    );
    expect(await runTool(read, { path: 'latin1.txt' }, ctx)).toMatch(/^error: "latin1.txt" is a binary file \(5 bytes\)/);
  });

  it('refuses a file over 10 MB without reading it, saying how to look at parts', async () => {
    fs.writeFileSync(file('big.log'), '');
    fs.truncateSync(file('big.log'), 10 * 1024 * 1024 + 1);
    expect(await runTool(read, { path: 'big.log' }, ctx)).toBe(
      `error: "big.log" is 10 MB, over the 10 MB a file tool reads; look at parts of it with shell_exec (head, tail, sed -n '100,200p') or search it with grep`,
    );
  });

  it('reads a PDF (known by its first bytes, whatever its name) as numbered text, page by page', async () => {
    fs.writeFileSync(file('scan.bin'), minimalPdf(['The quick brown fox jumps over the lazy dog.', 'Second page text.']));
    expect(await runTool(read, { path: 'scan.bin' }, ctx)).toBe(
      '     1\t[page 1 of 2]\n     2\tThe quick brown fox jumps over the lazy dog.\n     3\t[page 2 of 2]\n     4\tSecond page text.',
    );
    expect(await runTool(read, { path: 'scan.bin', offset: 3, limit: 1 }, ctx)).toBe('     3\t[page 2 of 2]\n[lines 3-3 of 4; call file_read with offset 4 to read on]');
  });

  it('says a damaged PDF could not be read', async () => {
    fs.writeFileSync(file('broken.pdf'), '%PDF-1.4\nthis is not really a pdf\n');
    expect(await runTool(read, { path: 'broken.pdf' }, ctx)).toMatch(/^error: "broken.pdf" looks like a PDF but its text could not be read \(.+\); it may be damaged or encrypted$/);
  });

  it('reads attachments saved under uploads/, as the downloads save them', async () => {
    const staged = path.join(fixture.root, 'staged-note.txt');
    fs.writeFileSync(staged, 'from the chat\n');
    const saved = await placeWorkspaceFile(workspace, 'uploads', 'note.txt', staged);
    expect(await runTool(read, { path: saved }, ctx)).toBe('     1\tfrom the chat');
  });

  it('refuses a FIFO at once instead of waiting on it', async () => {
    execFileSync('mkfifo', [file('pipe')]);
    const started = Date.now();
    expect(await runTool(read, { path: 'pipe' }, ctx)).toBe('error: "pipe" is not a file');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('answers a missing file or a folder plainly, and a bad argument through validation', async () => {
    fs.mkdirSync(file('docs'));
    expect(await runTool(read, { path: 'nope.txt' }, ctx)).toBe('error: "nope.txt" does not exist in the workspace');
    expect(await runTool(read, { path: 'docs' }, ctx)).toBe('error: "docs" is not a file');
    expect(await runTool(read, { path: 'a.txt', offset: 0 }, ctx)).toMatch(/^invalid_arguments: \/offset must be >= 1/);
  });
});

describe('file_write', () => {
  it('creates the missing folders and says what it wrote, exactly', async () => {
    expect(await runTool(write, { path: 'a/b/c.txt', content: 'one\ntwo\n' }, ctx)).toBe('wrote a/b/c.txt (8 bytes, 2 lines)');
    expect(fs.readFileSync(file('a/b/c.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(await runTool(write, { path: 'no-newline.txt', content: 'héllo' }, ctx)).toBe('wrote no-newline.txt (6 bytes, 1 lines)');
    expect(await runTool(write, { path: 'empty.txt', content: '' }, ctx)).toBe('wrote empty.txt (0 bytes, 0 lines)');
    expect(fs.statSync(file('empty.txt')).mode & 0o777).toBe(0o644);
  });

  it('refuses to replace an existing file unless told to, then replaces it', async () => {
    fs.writeFileSync(file('keep.txt'), 'original\n');
    expect(await runTool(write, { path: 'keep.txt', content: 'new\n' }, ctx)).toBe(
      'error: "keep.txt" already exists; read it and change it with file_edit, or call file_write again with overwrite: true to replace it',
    );
    expect(fs.readFileSync(file('keep.txt'), 'utf8')).toBe('original\n');
    expect(await runTool(write, { path: 'keep.txt', content: 'new\n', overwrite: true }, ctx)).toBe('wrote keep.txt (4 bytes, 1 lines)');
    expect(fs.readFileSync(file('keep.txt'), 'utf8')).toBe('new\n');
    expect(fs.readdirSync(workspace)).toEqual(['keep.txt']);
  });

  it('refuses content over 1 MB, saying the limit, and writes nothing', async () => {
    const result = await runTool(write, { path: 'huge.txt', content: 'z'.repeat(1024 * 1024 + 1) }, ctx);
    expect(result).toBe("error: content is 1.0 MB, over file_write's 1 MB limit (1048576 bytes); write a smaller file, or make large files with shell_exec");
    expect(fs.existsSync(file('huge.txt'))).toBe(false);
    expect(await runTool(write, { path: 'just.txt', content: 'z'.repeat(1024 * 1024) }, ctx)).toBe('wrote just.txt (1048576 bytes, 1 lines)');
  });

  it("keeps a replaced file's mode and owner", async () => {
    fs.writeFileSync(file('run.sh'), 'echo old\n', { mode: 0o750 });
    fs.chmodSync(file('run.sh'), 0o750);
    fs.chownSync(file('run.sh'), 4321, 4322);
    expect(await runTool(write, { path: 'run.sh', content: 'echo new\n', overwrite: true }, ctx)).toBe('wrote run.sh (9 bytes, 1 lines)');
    const stat = fs.statSync(file('run.sh'));
    expect([stat.mode & 0o7777, stat.uid, stat.gid]).toEqual([0o750, 4321, 4322]);
  });

  it('writes through a symlink that stays inside, to the file it names', async () => {
    fs.writeFileSync(file('real.txt'), 'old\n');
    fs.symlinkSync('real.txt', file('alias.txt'));
    expect(await runTool(write, { path: 'alias.txt', content: 'new\n', overwrite: true }, ctx)).toBe('wrote alias.txt (4 bytes, 1 lines)');
    expect(fs.readFileSync(file('real.txt'), 'utf8')).toBe('new\n');
    expect(fs.lstatSync(file('alias.txt')).isSymbolicLink()).toBe(true);
  });

  it('refuses a folder as the target, and the workspace itself', async () => {
    fs.mkdirSync(file('docs'));
    expect(await runTool(write, { path: 'docs', content: 'x', overwrite: true }, ctx)).toBe('error: "docs" is a folder; give a file name in it');
    expect(await runTool(write, { path: '.', content: 'x' }, ctx)).toBe('error: "." is the workspace itself, not a file');
  });
});

describe('file_edit', () => {
  beforeEach(() => {
    fs.writeFileSync(file('code.ts'), 'const a = 1;\nconst b = 2;\nconst c = 1;\nexport { a, b, c };\n');
  });

  it('replaces a unique match and shows the lines around it', async () => {
    expect(await runTool(edit, { path: 'code.ts', old_string: 'const b = 2;', new_string: 'const b = 20;\nconst d = 4;' }, ctx)).toBe(
      'replaced 1 occurrence in code.ts\n     1\tconst a = 1;\n     2\tconst b = 20;\n     3\tconst d = 4;\n     4\tconst c = 1;\n     5\texport { a, b, c };',
    );
    expect(fs.readFileSync(file('code.ts'), 'utf8')).toBe('const a = 1;\nconst b = 20;\nconst d = 4;\nconst c = 1;\nexport { a, b, c };\n');
  });

  it('refuses more than one match unless replace_all, which says how many it replaced', async () => {
    expect(await runTool(edit, { path: 'code.ts', old_string: '= 1;', new_string: '= 9;' }, ctx)).toBe(
      'error: old_string matches 2 times in "code.ts"; add surrounding lines to make it unique, or set replace_all: true to replace all 2',
    );
    expect(fs.readFileSync(file('code.ts'), 'utf8')).toContain('const a = 1;');
    expect(await runTool(edit, { path: 'code.ts', old_string: '= 1;', new_string: '= 9;', replace_all: true }, ctx)).toMatch(/^replaced 2 occurrences in code.ts\n/);
    expect(fs.readFileSync(file('code.ts'), 'utf8')).toBe('const a = 9;\nconst b = 2;\nconst c = 9;\nexport { a, b, c };\n');
  });

  it('answers the mistakes of the reference agents, changing nothing', async () => {
    const before = fs.readFileSync(file('code.ts'), 'utf8');
    expect(await runTool(edit, { path: 'code.ts', old_string: 'a', new_string: 'a' }, ctx)).toBe('error: old_string and new_string are the same, so there is nothing to change');
    expect(await runTool(edit, { path: 'code.ts', old_string: '', new_string: 'x' }, ctx)).toBe(
      'error: old_string is empty; give the exact text to replace (to create a file or replace all of it, use file_write)',
    );
    expect(await runTool(edit, { path: 'missing.ts', old_string: 'a', new_string: 'b' }, ctx)).toBe('error: "missing.ts" does not exist; use file_write to create it');
    expect(await runTool(edit, { path: 'code.ts', old_string: 'const z = 26;', new_string: 'x' }, ctx)).toBe(
      'error: old_string was not found in "code.ts"; read the file with file_read and copy the text exactly, with its whitespace and indentation',
    );
    expect(await runTool(edit, { path: 'code.ts', old_string: '     2\tconst b = 2;', new_string: 'x' }, ctx)).toMatch(/^error: old_string was not found in "code.ts"; it seems to include file_read's line numbers/);
    expect(await runTool(edit, { path: 'code.ts', old_string: 'const  b =\n2;', new_string: 'x' }, ctx)).toMatch(/; it is there with different spaces, tabs or line breaks;/);
    expect(await runTool(edit, { path: 'code.ts', old_string: 'CONST B = 2;', new_string: 'x' }, ctx)).toMatch(/; it is there in different upper\/lower case;/);
    expect(await runTool(edit, { path: 'code.ts', old_string: 'a' }, ctx)).toMatch(/^invalid_arguments: \(arguments\): missing required property "new_string"/);
    expect(fs.readFileSync(file('code.ts'), 'utf8')).toBe(before);
  });

  it('keeps Windows line ends when the model writes \\n', async () => {
    fs.writeFileSync(file('dos.txt'), 'one\r\ntwo\r\nthree\r\n');
    expect(await runTool(edit, { path: 'dos.txt', old_string: 'one\ntwo', new_string: 'uno\ndos' }, ctx)).toMatch(/^replaced 1 occurrence in dos.txt/);
    expect(fs.readFileSync(file('dos.txt'), 'utf8')).toBe('uno\r\ndos\r\nthree\r\n');
  });

  it('refuses a binary file, and keeps the mode of the file it edits', async () => {
    fs.writeFileSync(file('blob.bin'), Buffer.from([1, 0, 2]));
    expect(await runTool(edit, { path: 'blob.bin', old_string: 'a', new_string: 'b' }, ctx)).toBe('error: "blob.bin" is not a text file (binary or not UTF-8), so file_edit cannot change it');
    fs.chmodSync(file('code.ts'), 0o600);
    await runTool(edit, { path: 'code.ts', old_string: 'const b = 2;', new_string: 'const b = 3;' }, ctx);
    expect(fs.statSync(file('code.ts')).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(workspace).sort()).toEqual(['blob.bin', 'code.ts']);
  });
});
