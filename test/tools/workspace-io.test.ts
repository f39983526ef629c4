// What Parlor writes into, removes from or opens in a workspace stays in it, whatever a command made of the folders:
// every "outside" here is a temp folder of the test's own.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { openWorkspaceFileForReading, placeWorkspaceFile, removeWorkspaceFile, workspaceFolderBytes } from '../../src/tools/workspace-io.ts';

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-ws-io-')));
const workspace = path.join(root, 'workspace');
const outside = path.join(root, 'outside');
const staging = path.join(root, 'staging');

/** A finished file in a folder of Parlor's own, as a connector leaves it. */
function staged(name: string, content: string, folder = staging): string {
  fs.mkdirSync(folder, { recursive: true });
  const file = path.join(folder, name);
  fs.writeFileSync(file, content);
  return file;
}

beforeEach(() => {
  for (const dir of [workspace, outside, staging]) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir);
  }
});
afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe('placeWorkspaceFile', () => {
  it('creates the folder when missing and returns the path relative to the workspace', async () => {
    expect(await placeWorkspaceFile(workspace, 'uploads', 'a.txt', staged('a.txt', 'hello'))).toBe(path.join('uploads', 'a.txt'));
    expect(fs.readFileSync(path.join(workspace, 'uploads', 'a.txt'), 'utf8')).toBe('hello');
    expect(fs.existsSync(path.join(staging, 'a.txt'))).toBe(false);
  });

  it('creates nothing outside, not even an empty file, when the folder is a symlink out', async () => {
    fs.symlinkSync(outside, path.join(workspace, 'uploads'));
    await expect(placeWorkspaceFile(workspace, 'uploads', 'job', staged('job', '* * * * * root evil'))).rejects.toThrow('"uploads" leads outside the workspace');
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('refuses a folder further down that leads out, and a dangling symlink where the folder should be', async () => {
    fs.mkdirSync(path.join(workspace, 'uploads'));
    fs.symlinkSync(outside, path.join(workspace, 'uploads', 'deep'));
    await expect(placeWorkspaceFile(workspace, 'uploads/deep', 'x', staged('x', 'x'))).rejects.toThrow('"uploads/deep" leads outside the workspace');
    fs.symlinkSync(path.join(outside, 'not-yet'), path.join(workspace, 'later'));
    await expect(placeWorkspaceFile(workspace, 'later', 'x', staged('x', 'x'))).rejects.toThrow('"later" is not a folder in the workspace');
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('replaces a symlink at the file name instead of writing through it', async () => {
    fs.writeFileSync(path.join(outside, 'victim'), 'untouched');
    fs.mkdirSync(path.join(workspace, 'uploads'));
    fs.symlinkSync(path.join(outside, 'victim'), path.join(workspace, 'uploads', 'name'));
    await placeWorkspaceFile(workspace, 'uploads', 'name', staged('name', 'new'));
    expect(fs.readFileSync(path.join(outside, 'victim'), 'utf8')).toBe('untouched');
    expect(fs.lstatSync(path.join(workspace, 'uploads', 'name')).isFile()).toBe(true);
  });

  it.skipIf(!fs.existsSync('/dev/shm'))('copies a file from another filesystem in through a file of its own, then removes the source', async () => {
    const other = fs.mkdtempSync('/dev/shm/parlor-ws-io-');
    try {
      fs.mkdirSync(path.join(workspace, 'uploads'));
      fs.symlinkSync(path.join(outside, 'victim'), path.join(workspace, 'uploads', 'big.bin'));
      const source = staged('big.bin', 'x'.repeat(300_000), other);
      expect(await placeWorkspaceFile(workspace, 'uploads', 'big.bin', source)).toBe(path.join('uploads', 'big.bin'));
      expect(fs.readFileSync(path.join(workspace, 'uploads', 'big.bin'), 'utf8')).toHaveLength(300_000);
      expect(fs.readdirSync(path.join(workspace, 'uploads'))).toEqual(['big.bin']);
      expect(fs.existsSync(source)).toBe(false);
      expect(fs.existsSync(path.join(outside, 'victim'))).toBe(false);
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
  });
});

describe('removeWorkspaceFile', () => {
  it('removes the file it placed, and nothing through a folder swapped for a symlink since', async () => {
    const saved = await placeWorkspaceFile(workspace, 'uploads', 'f.txt', staged('f.txt', 'mine'));
    await removeWorkspaceFile(workspace, saved);
    expect(fs.readdirSync(path.join(workspace, 'uploads'))).toEqual([]);

    fs.writeFileSync(path.join(outside, 'f.txt'), 'not mine');
    fs.rmdirSync(path.join(workspace, 'uploads'));
    fs.symlinkSync(outside, path.join(workspace, 'uploads'));
    await removeWorkspaceFile(workspace, saved);
    expect(fs.readFileSync(path.join(outside, 'f.txt'), 'utf8')).toBe('not mine');
  });
});

describe('workspaceFolderBytes', () => {
  it('counts the files below the folder without following symlinks out', async () => {
    fs.mkdirSync(path.join(workspace, 'uploads', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(workspace, 'uploads', 'a'), Buffer.alloc(10));
    fs.writeFileSync(path.join(workspace, 'uploads', 'sub', 'b'), Buffer.alloc(5));
    fs.writeFileSync(path.join(outside, 'huge'), Buffer.alloc(10_000));
    fs.symlinkSync(outside, path.join(workspace, 'uploads', 'out'));
    fs.symlinkSync(path.join(outside, 'huge'), path.join(workspace, 'uploads', 'huge'));
    expect(await workspaceFolderBytes(workspace, 'uploads')).toBe(15);
    expect(await workspaceFolderBytes(workspace, 'missing')).toBe(0);
    fs.rmSync(path.join(workspace, 'uploads'), { recursive: true });
    fs.symlinkSync(outside, path.join(workspace, 'uploads'));
    expect(await workspaceFolderBytes(workspace, 'uploads')).toBe(0);
  });
});

describe('openWorkspaceFileForReading', () => {
  it('opens the file that was checked, and refuses one whose folder became a symlink since', async () => {
    fs.mkdirSync(path.join(workspace, 'd'));
    fs.writeFileSync(path.join(workspace, 'd', 'r.txt'), 'checked');
    fs.writeFileSync(path.join(outside, 'r.txt'), 'secret');
    const real = path.join(workspace, 'd', 'r.txt');
    const handle = await openWorkspaceFileForReading(workspace, real);
    expect(await handle.readFile('utf8')).toBe('checked');
    await handle.close();

    fs.renameSync(path.join(workspace, 'd'), path.join(workspace, 'd2'));
    fs.symlinkSync(outside, path.join(workspace, 'd'));
    await expect(openWorkspaceFileForReading(workspace, real)).rejects.toThrow('"d" is not a folder in the workspace');
  });

  it('does not hang on a FIFO put where the file was', async () => {
    const fifo = path.join(workspace, 'pipe');
    if (spawnSync('mkfifo', [fifo]).status !== 0) return;
    const handle = await openWorkspaceFileForReading(workspace, fifo);
    expect((await handle.stat()).isFile()).toBe(false);
    await handle.close();
  });
});
