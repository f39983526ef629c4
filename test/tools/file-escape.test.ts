// Every tool that takes a path from the model reaches the persona's workspace and nothing else: the same table of
// ways out, run against each of them, with everything outside compared before and after.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { findRipgrep } from '../../src/tools/grep-ripgrep.ts';
import type { Tool } from '../../src/tools/types.ts';
import { createFileEditTool } from '../../tools/file-edit.ts';
import { createFileReadTool } from '../../tools/file-read.ts';
import { createFileWriteTool } from '../../tools/file-write.ts';
import { createGlobTool } from '../../tools/glob.ts';
import { createGrepTool } from '../../tools/grep.ts';
import { createListDirTool } from '../../tools/list-dir.ts';
import { createSendMessageTool } from '../../tools/send-message.ts';
import { makeFileToolsFixture, runTool, snapshot } from './file-helpers.ts';

const SECRET = 'TOP-SECRET-4f1c';
const fixture = makeFileToolsFixture('parlor-file-escape-');
const { root, personasDir, workspace } = fixture;
const outside = path.join(root, 'outside');
const other = path.join(personasDir, 'other');
// A persona whose folder lies inside this workspace (a workspace that holds a personas folder).
const nested = path.join(workspace, 'team');
const personaDirs = [path.join(personasDir, 'tester'), other, nested];

beforeEach(() => {
  for (const dir of [outside, other, path.join(personasDir, 'tester')]) fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(outside, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(outside, 'secret.txt'), `hello ${SECRET}\n`);
  fs.writeFileSync(path.join(outside, 'sub', 'deep.txt'), `hello ${SECRET}\n`);
  fs.mkdirSync(path.join(other, 'workspace'), { recursive: true });
  fs.writeFileSync(path.join(other, 'SOUL.md'), `hello ${SECRET}\n`);
  fs.writeFileSync(path.join(other, '.env'), `TOKEN=${SECRET}\n`);
  fs.mkdirSync(path.join(workspace, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(personasDir, 'tester', '.env'), `TOKEN=${SECRET}\n`);
  fs.writeFileSync(path.join(workspace, 'notes.txt'), 'hello notes\n');
  fs.writeFileSync(path.join(workspace, 'sub', 'inner.txt'), 'hello inner\n');
  fs.writeFileSync(path.join(workspace, '.env'), `TOKEN=${SECRET}\n`);
  fs.writeFileSync(path.join(workspace, '.env.local'), `TOKEN=${SECRET}\n`);
  fs.symlinkSync('notes.txt', path.join(workspace, 'link-in.txt'));
  fs.symlinkSync('sub', path.join(workspace, 'link-sub'));
  fs.symlinkSync('.env', path.join(workspace, 'env-link.txt'));
  fs.mkdirSync(path.join(workspace, '.envdir'));
  fs.symlinkSync('.envdir', path.join(workspace, 'env-folder'));
  fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(workspace, 'link-out.txt'));
  fs.symlinkSync(outside, path.join(workspace, 'out-dir'));
  fs.mkdirSync(nested);
  fs.writeFileSync(path.join(nested, 'SOUL.md'), `hello ${SECRET}\n`);
});
afterAll(() => fixture.remove());

interface Row {
  label: string;
  file: string;
  folder: string;
  /** What the refusal says; undefined: allowed. */
  refused?: RegExp;
}

const rows: Row[] = [
  { label: '..', file: '..', folder: '..', refused: /outside the workspace/ },
  { label: '../../etc/passwd', file: '../../etc/passwd', folder: '../../etc', refused: /outside the workspace/ },
  { label: 'an absolute path outside', file: path.join(outside, 'secret.txt'), folder: outside, refused: /outside the workspace/ },
  { label: 'an absolute path inside', file: path.join(workspace, 'notes.txt'), folder: path.join(workspace, 'sub') },
  { label: 'a symlink inside to inside', file: 'link-in.txt', folder: 'link-sub' },
  { label: 'a symlink inside to outside', file: 'link-out.txt', folder: 'out-dir', refused: /leads outside the workspace/ },
  { label: 'a symlinked folder leading out', file: 'out-dir/secret.txt', folder: 'out-dir/sub', refused: /leads outside the workspace/ },
  { label: '.env', file: '.env', folder: '.env', refused: /secrets file/ },
  { label: '.env.local', file: '.env.local', folder: '.env.local', refused: /secrets file/ },
  { label: 'a symlink to .env', file: 'env-link.txt', folder: 'env-folder', refused: /secrets file/ },
  { label: "another persona's folder beside this one", file: '../../other/SOUL.md', folder: '../../other', refused: /outside the workspace/ },
  { label: "another persona's folder inside the workspace", file: 'team/SOUL.md', folder: 'team', refused: /another persona's folder/ },
  { label: 'URL-encoded ../', file: '%2e%2e%2f%2e%2e%2fother%2fSOUL.md', folder: '%2e%2e%2f', refused: /URL-encoded and decodes to/ },
  { label: 'a NUL byte', file: 'notes.txt\0.png', folder: 'sub\0', refused: /NUL byte/ },
];

interface Subject {
  tool: Tool;
  args(row: Row): Record<string, unknown>;
  /** What an allowed call answers. */
  allowed: RegExp;
}

const subjects: Record<string, Subject> = {
  file_read: { tool: createFileReadTool({ personaDirs }), args: (r) => ({ path: r.file }), allowed: /^ {5}1\thello notes$/ },
  file_write: { tool: createFileWriteTool({ personaDirs }), args: (r) => ({ path: r.file, content: 'replaced\n', overwrite: true }), allowed: /^wrote .* \(9 bytes, 1 lines\)$/ },
  file_edit: { tool: createFileEditTool({ personaDirs }), args: (r) => ({ path: r.file, old_string: 'hello', new_string: 'HELLO' }), allowed: /^replaced 1 occurrence in / },
  list_dir: { tool: createListDirTool({ personaDirs }), args: (r) => ({ path: r.folder }), allowed: /inner\.txt/ },
  glob: { tool: createGlobTool({ personaDirs }), args: (r) => ({ pattern: '**/*.txt', path: r.folder }), allowed: /inner\.txt/ },
  'grep (folder, JavaScript)': { tool: createGrepTool({ personaDirs, ripgrep: false }), args: (r) => ({ pattern: 'hello', path: r.folder }), allowed: /inner\.txt:1:hello inner/ },
  'grep (file, JavaScript)': { tool: createGrepTool({ personaDirs, ripgrep: false }), args: (r) => ({ pattern: 'hello', path: r.file }), allowed: /^notes\.txt:1:hello notes$/ },
  send_message: { tool: createSendMessageTool({ outgoingDir: path.join(root, 'outgoing'), personaDirs }), args: (r) => ({ text: 'here', files: [r.file] }), allowed: /^sent to telegram:1$/ },
};

const RG = findRipgrep();
const withRipgrep: Record<string, Subject> = RG
  ? {
      'grep (folder, ripgrep)': { ...subjects['grep (folder, JavaScript)'], tool: createGrepTool({ personaDirs, ripgrep: RG }) },
      'grep (file, ripgrep)': { ...subjects['grep (file, JavaScript)'], tool: createGrepTool({ personaDirs, ripgrep: RG }) },
    }
  : {};

describe.each(Object.entries(subjects))('%s', (_name, subject) => {
  it.each(rows)('$label', (row) => checkRow(subject, row));
});

// Only where ripgrep is installed (CI may not have it); the JavaScript search above runs everywhere.
describe.skipIf(!RG)('with ripgrep on PATH', () => {
  describe.each(Object.entries(withRipgrep))('%s', (_name, subject) => {
    it.each(rows)('$label', (row) => checkRow(subject, row));
  });
});

async function checkRow(subject: Subject, row: Row): Promise<void> {
  const before = { outside: snapshot(outside), other: snapshot(other), env: fs.readFileSync(path.join(personasDir, 'tester', '.env'), 'utf8'), nested: snapshot(nested) };
  const sent = fixture.ctx.deliveries.length;
  const result = await runTool(subject.tool, subject.args(row), fixture.ctx);
  if (row.refused) {
    expect(result).toMatch(/^error: /);
    expect(result).toMatch(row.refused);
    expect(fixture.ctx.deliveries).toHaveLength(sent);
  } else {
    expect(result).toMatch(subject.allowed);
  }
  expect(result).not.toContain(SECRET);
  expect({ outside: snapshot(outside), other: snapshot(other), env: fs.readFileSync(path.join(personasDir, 'tester', '.env'), 'utf8'), nested: snapshot(nested) }).toEqual(before);
}

describe('refused calls change nothing in the workspace either', () => {
  it('file_write to .env leaves the workspace as it was', async () => {
    const before = snapshot(workspace);
    expect(await runTool(createFileWriteTool(), { path: '.env', content: 'X=1', overwrite: true }, fixture.ctx)).toBe('error: ".env" is a secrets file and cannot be used');
    expect(await runTool(createFileWriteTool(), { path: 'sub/.env.production', content: 'X=1' }, fixture.ctx)).toBe('error: "sub/.env.production" is a secrets file and cannot be used');
    expect(snapshot(workspace)).toEqual(before);
  });

  it('file_write through a symlinked folder leading out creates nothing outside, not even a folder', async () => {
    expect(await runTool(createFileWriteTool(), { path: 'out-dir/new/file.txt', content: 'x' }, fixture.ctx)).toBe('error: "out-dir/new/file.txt" leads outside the workspace');
    expect(fs.readdirSync(outside).sort()).toEqual(['secret.txt', 'sub']);
  });

  it('a path that only looks encoded (a file called 50%.txt, or a%20b.txt) is used as it is written', async () => {
    expect(await runTool(createFileWriteTool(), { path: '50%.txt', content: 'half\n' }, fixture.ctx)).toBe('wrote 50%.txt (5 bytes, 1 lines)');
    expect(await runTool(createFileWriteTool(), { path: 'a%20b.txt', content: 'b\n' }, fixture.ctx)).toBe('wrote a%20b.txt (2 bytes, 1 lines)');
    expect(fs.readFileSync(path.join(workspace, 'a%20b.txt'), 'utf8')).toBe('b\n');
    expect(await runTool(createFileReadTool(), { path: '50%.txt' }, fixture.ctx)).toBe('     1\thalf');
  });

  it('a hard link to a file outside is refused for reading, and replacing it leaves the file outside as it was', async () => {
    fs.linkSync(path.join(outside, 'secret.txt'), path.join(workspace, 'hard.txt'));
    expect(await runTool(createFileReadTool(), { path: 'hard.txt' }, fixture.ctx)).toMatch(/^error: "hard.txt" has 2 hard links/);
    expect(await runTool(createFileEditTool(), { path: 'hard.txt', old_string: 'hello', new_string: 'bye' }, fixture.ctx)).toMatch(/^error: "hard.txt" has 2 hard links/);
    expect(await runTool(createGrepTool({ personaDirs, ripgrep: false }), { pattern: 'hello' }, fixture.ctx)).not.toContain(SECRET);
    expect(await runTool(createFileWriteTool(), { path: 'hard.txt', content: 'mine\n', overwrite: true }, fixture.ctx)).toBe('wrote hard.txt (5 bytes, 1 lines)');
    expect(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(`hello ${SECRET}\n`);
    expect(fs.readFileSync(path.join(workspace, 'hard.txt'), 'utf8')).toBe('mine\n');
  });
});
