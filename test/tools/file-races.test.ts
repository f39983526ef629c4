// The workspace file tools against a command that changes the workspace while a tool runs: a folder swapped
// for a symlink between the resolver's look and the write, FIFOs, a huge sparse file. The swap is made at an exact
// moment here (the sandbox would loop it until it lands); what matters is where the bytes end up.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { findRipgrep } from '../../src/tools/grep-ripgrep.ts';
import { createFileEditTool } from '../../tools/file-edit.ts';
import { createFileReadTool } from '../../tools/file-read.ts';
import { createFileWriteTool } from '../../tools/file-write.ts';
import { createGlobTool } from '../../tools/glob.ts';
import { createGrepTool } from '../../tools/grep.ts';
import { createListDirTool } from '../../tools/list-dir.ts';
import { makeFileToolsFixture, runTool, snapshot } from './file-helpers.ts';

const fixture = makeFileToolsFixture('parlor-attack-files-');
const { personasDir, workspace, ctx } = fixture;
// Another persona whose folder lies inside this workspace: refused by the resolver (file-escape.test.ts).
const team = path.join(workspace, 'team');
const personaDirs = [path.join(personasDir, 'tester'), team];
const RG = findRipgrep();

beforeEach(() => {
  fs.rmSync(workspace, { recursive: true, force: true });
  fs.mkdirSync(path.join(workspace, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(workspace, 'sub', 'SOUL.md'), 'my own notes\n');
  fs.mkdirSync(team);
  fs.writeFileSync(path.join(team, 'SOUL.md'), 'the other persona\n');
  fs.mkdirSync(path.join(workspace, '.envdir'));
});
afterEach(() => vi.restoreAllMocks());
afterAll(() => fixture.remove());

/**
 * Swaps `sub` for a symlink to `target` when the write side re-resolves the folder, after the resolver's checks: the
 * `nth` look at the folder itself (1 for an existing file; 2 for a new one, whose folder the resolver looked at too).
 */
function swapSubOnWrite(target: string, nth = 1): void {
  const original = fsp.realpath.bind(fsp);
  const sub = path.join(workspace, 'sub');
  let looks = 0;
  vi.spyOn(fsp, 'realpath').mockImplementation((async (p: string, ...rest: unknown[]) => {
    if (String(p) === sub && ++looks === nth) {
      fs.renameSync(sub, path.join(workspace, 'sub.old'));
      fs.symlinkSync(target, sub);
    }
    return original(p as string, ...(rest as []));
  }) as typeof fsp.realpath);
}

describe('a folder swapped for a symlink between the check and the write', () => {
  it("file_write overwrite does not replace a file in another persona's folder inside the workspace", async () => {
    const before = snapshot(team);
    swapSubOnWrite('team');
    await runTool(createFileWriteTool({ personaDirs }), { path: 'sub/SOUL.md', content: 'planted\n', overwrite: true }, ctx);
    expect(snapshot(team)).toEqual(before);
  });

  it("file_edit does not rewrite a file in another persona's folder inside the workspace", async () => {
    fs.writeFileSync(path.join(team, 'SOUL.md'), 'my own notes\n');
    const before = snapshot(team);
    swapSubOnWrite('team');
    await runTool(createFileEditTool({ personaDirs }), { path: 'sub/SOUL.md', old_string: 'my own', new_string: 'hijacked' }, ctx);
    expect(snapshot(team)).toEqual(before);
  });

  it('file_write does not create a file in a .env* folder', async () => {
    swapSubOnWrite('.envdir', 2);
    await runTool(createFileWriteTool({ personaDirs }), { path: 'sub/new.md', content: 'planted\n' }, ctx);
    expect(fs.readdirSync(path.join(workspace, '.envdir'))).toEqual([]);
  });

  it("list_dir does not list another persona's folder swapped in after the look", async () => {
    swapSubOnWrite('team', 2);
    const out = await runTool(createListDirTool({ personaDirs }), { path: 'sub' }, ctx);
    expect(out).not.toContain('team/');
  });

  it('file_write through a folder swapped for a symlink leading out is refused (the defence that holds)', async () => {
    const outside = fs.mkdtempSync(path.join(fixture.root, 'outside-'));
    swapSubOnWrite(outside, 2);
    const out = await runTool(createFileWriteTool({ personaDirs }), { path: 'sub/new.md', content: 'planted\n' }, ctx);
    expect(out).toMatch(/^error: /);
    expect(fs.readdirSync(outside)).toEqual([]);
  });
});

describe('special files the sandbox puts in the workspace', () => {
  it('file_read, grep (both engines), glob and list_dir do not hang on FIFOs, whatever they are called', async () => {
    fs.writeFileSync(path.join(workspace, 'plain.txt'), 'needle\n');
    for (const name of ['pipe.txt', 'deep/pipe.md']) {
      fs.mkdirSync(path.dirname(path.join(workspace, name)), { recursive: true });
      fs.rmSync(path.join(workspace, name), { force: true });
      (await import('node:child_process')).execFileSync('mkfifo', [path.join(workspace, name)]);
    }
    expect(await runTool(createFileReadTool(), { path: 'pipe.txt' }, ctx)).toBe('error: "pipe.txt" is not a file');
    expect(await runTool(createGrepTool({ ripgrep: false }), { pattern: 'needle' }, ctx)).toBe('plain.txt:1:needle');
    if (RG) expect(await runTool(createGrepTool({ ripgrep: RG }), { pattern: 'needle' }, ctx)).toBe('plain.txt:1:needle');
    expect(await runTool(createGrepTool({ ripgrep: false }), { pattern: 'needle', path: 'pipe.txt' }, ctx)).toMatch(/^error: "pipe.txt" is neither a file nor a folder$/);
    expect(await runTool(createGlobTool(), { pattern: '**/*' }, ctx)).not.toContain('pipe');
    expect(await runTool(createListDirTool(), { path: 'deep' }, ctx)).toMatch(/^other +- +deep\/pipe\.md$/);
  }, 20_000);

  it('a sparse file of 8 GB is refused by file_read and file_edit and skipped by grep, without reading it', async () => {
    const big = path.join(workspace, 'big.txt');
    fs.writeFileSync(big, 'needle\n');
    fs.truncateSync(big, 8 * 1024 ** 3);
    const started = Date.now();
    expect(await runTool(createFileReadTool(), { path: 'big.txt' }, ctx)).toMatch(/^error: "big.txt" is 8.0 GB, over the 10 MB a file tool reads/);
    expect(await runTool(createFileEditTool(), { path: 'big.txt', old_string: 'needle', new_string: 'x' }, ctx)).toMatch(/^error: "big.txt" is 8.0 GB/);
    expect(await runTool(createGrepTool({ ripgrep: false }), { pattern: 'needle' }, ctx)).toBe('no matches for "needle" in your workspace');
    if (RG) expect(await runTool(createGrepTool({ ripgrep: RG }), { pattern: 'needle' }, ctx)).toBe('no matches for "needle" in your workspace');
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 20_000);

  it('a symlink to /dev/zero or /proc/self/environ is refused, and grep passes over it', async () => {
    fs.symlinkSync('/dev/zero', path.join(workspace, 'zero.txt'));
    fs.symlinkSync('/proc/self/environ', path.join(workspace, 'environ.txt'));
    expect(await runTool(createFileReadTool(), { path: 'zero.txt' }, ctx)).toBe('error: "zero.txt" leads outside the workspace');
    expect(await runTool(createFileReadTool(), { path: 'environ.txt' }, ctx)).toBe('error: "environ.txt" leads outside the workspace');
    expect(await runTool(createGrepTool({ ripgrep: false }), { pattern: 'PATH=' }, ctx)).toBe('no matches for "PATH=" in your workspace');
    if (RG) expect(await runTool(createGrepTool({ ripgrep: RG }), { pattern: 'PATH=' }, ctx)).toBe('no matches for "PATH=" in your workspace');
  });

  it('grep include cannot climb out, nor name an absolute path', async () => {
    for (const include of ['../**', '/etc/*', 'sub/../../x']) {
      expect(await runTool(createGrepTool({ ripgrep: false }), { pattern: 'root', include }, ctx)).toMatch(/^error: include is a glob relative/);
    }
  });

  it('a glob pattern with a brace or extglob that expands to .. finds nothing outside', async () => {
    const outsideFile = path.join(personasDir, 'tester', 'SOUL.md');
    fs.writeFileSync(outsideFile, 'persona soul\n');
    for (const pattern of ['{..,x}/*.md', '{..,.}/{..,.}/*', '+(..)/*', '**/..%2f*']) {
      const out = await runTool(createGlobTool(), { pattern }, ctx);
      expect(out).not.toContain('tester/SOUL.md');
      expect(out).not.toMatch(/^\.\.\//m);
    }
    fs.rmSync(outsideFile);
  });
});
