import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { detectShellIsolation, shellAccess, type SandboxStatus } from '../../src/tools/sandbox.ts';
import { findShellUser } from '../../src/tools/shell-user.ts';
import { createShellExecTool } from '../../tools/shell-exec.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { recordingLogger } from './shell-helpers.ts';

// Without bubblewrap (looked for where there is none) and with Parlor as root, commands run as a user of their own.
// The layout is a real install's, in a folder any user may pass through (a checkout in /srv), so that what keeps
// the secrets from the command is their modes and Parlor's uid, not a folder above them closed to everyone.
const NO_BWRAP = '/nonexistent-parlor-test-bin';
const isRoot = process.getuid?.() === 0;
const SECRET = 'parlor-secret-marker-7d2e';

let root: string;
let home: string;
let personasDir: string;
let workspace: string;
let envFile: string;
let persona: ReturnType<typeof makePersona>;
let status: SandboxStatus;
const secretFiles = () => ({
  personaEnv: path.join(personasDir, 'tester', '.env'),
  otherEnv: path.join(personasDir, 'other', '.env'),
  envFile,
  soul: path.join(personasDir, 'tester', 'SOUL.md'),
  serverLog: path.join(home, 'postgres.log'),
});

beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-shell-user-')));
  fs.chmodSync(root, 0o755);
  home = path.join(root, '.parlor');
  personasDir = path.join(root, 'personas');
  workspace = path.join(personasDir, 'tester', 'workspace');
  envFile = path.join(root, '.env');
  fs.mkdirSync(home);
  fs.writeFileSync(path.join(home, 'postgres.json'), JSON.stringify({ port: 5432, password: SECRET }), { mode: 0o600 });
  fs.writeFileSync(path.join(home, 'postgres.log'), `ERROR: ${SECRET}\n`, { mode: 0o644 });
  fs.mkdirSync(path.join(workspace, 'notes'), { recursive: true });
  fs.writeFileSync(path.join(workspace, 'notes', 'todo.txt'), 'written by the owner\n', { mode: 0o644 });
  fs.mkdirSync(path.join(personasDir, 'other', 'workspace'), { recursive: true });
  for (const file of Object.values(secretFiles())) if (!fs.existsSync(file)) fs.writeFileSync(file, `TOKEN=${SECRET}\n`, { mode: 0o644 });
  persona = makePersona({ name: 'tester', dir: path.join(personasDir, 'tester'), workspace, secrets: { GITHUB_TOKEN: 'ghp_not_really_a_token' } });
  if (isRoot) status = detectShellIsolation({ path: NO_BWRAP });
});
afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe.skipIf(!isRoot)('shell_exec as a user of its own (no bubblewrap, Parlor is root)', () => {
  // What the app hides: Parlor's home, the personas folder, the .env beside it, and each persona's folder.
  let shell: ReturnType<typeof createShellExecTool>;
  beforeAll(() => {
    const hide = [home, personasDir, envFile, path.join(personasDir, 'tester'), path.join(personasDir, 'other')];
    shell = createShellExecTool({ sandbox: { hide, status: () => status } });
  });
  const run = (command: string, who = persona) => shell.run({ command }, makeToolContext({ persona: who })) as Promise<string>;

  afterEach(() => {
    delete process.env.PARLOR_SANDBOX_TEST_SECRET;
  });

  it('says so, and runs the command as that user rather than root, in the workspace as its home', async () => {
    expect(status).toMatchObject({ available: false, detail: 'bubblewrap is not installed (apt install bubblewrap); commands run as the parlor-shell user' });
    expect(shellAccess(persona, status)).toEqual({ mode: 'separate-uid' });
    const out = await run('id -u; id -un; id -G; echo "$HOME $USER"; pwd');
    const [exit, uid, name, groups, homeAndUser, cwd] = out.split('\n');
    expect(exit).toBe('exit=0');
    expect(Number(uid)).not.toBe(0);
    expect(Number(uid)).toBe(status.separateUser!.uid);
    expect(name).toBe('parlor-shell');
    // Root's groups are gone too: only the user's own.
    expect(groups).toBe(String(status.separateUser!.gid));
    expect([homeAndUser, cwd]).toEqual([`${workspace} parlor-shell`, workspace]);
  });

  it("cannot read a file of Parlor's home with mode 600, nor Parlor's environment through /proc", async () => {
    process.env.PARLOR_SANDBOX_TEST_SECRET = SECRET;
    const out = await run(`cat '${path.join(home, 'postgres.json')}'; cat /proc/$PPID/environ; tr "\\0" "\\n" < /proc/1/environ`);
    // Compared as booleans: were this to fail, the output would hold Parlor's whole environment.
    expect(out.includes(SECRET)).toBe(false);
    expect(out.includes('PARLOR_SANDBOX_TEST_SECRET')).toBe(false);
    expect(out).toContain('postgres.json: Permission denied');
    expect(out).toMatch(/environ: Permission denied/);
    expect((fs.statSync(path.join(home, 'postgres.json')).mode & 0o777).toString(8)).toBe('600');
  });

  it("cannot read the persona's .env, other personas' .env or Parlor's .env, whatever their mode was", async () => {
    const files = secretFiles();
    for (const file of Object.values(files)) fs.chmodSync(file, 0o644);
    const { log, warnings } = recordingLogger();
    const out = (await shell.run({ command: Object.values(files).map((f) => `cat '${f}'`).join('; ') }, { ...makeToolContext({ persona }), log })) as string;
    expect(out.includes(SECRET)).toBe(false);
    expect(out.match(/Permission denied/g)).toHaveLength(5);
    const modes = Object.fromEntries(Object.entries(files).map(([name, file]) => [name, (fs.statSync(file).mode & 0o777).toString(8)]));
    // The .env files lose group and others; the rest of Parlor's files lose others (the server's group keeps its log).
    expect(modes).toEqual({ personaEnv: '600', otherEnv: '600', envFile: '600', soul: '640', serverLog: '640' });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^made .+ unreadable to other users, so that commands run as parlor-shell cannot read them$/);
    // Once closed, they stay so without another word.
    const { log: quiet, warnings: none } = recordingLogger();
    await shell.run({ command: 'true' }, { ...makeToolContext({ persona }), log: quiet });
    expect(none).toEqual([]);
  });

  it('runs nothing while a secret file belongs to that user', async () => {
    const otherEnv = secretFiles().otherEnv;
    fs.chownSync(otherEnv, status.separateUser!.uid, 0);
    try {
      const out = await run('touch should-not-exist');
      expect(out).toBe(`error: the parlor-shell user could read Parlor's secrets: ${otherEnv} belongs to the parlor-shell user (chown it to root); the command did not run.`);
      expect(fs.existsSync(path.join(workspace, 'should-not-exist'))).toBe(false);
    } finally {
      fs.chownSync(otherEnv, 0, 0);
    }
  });

  it('keeps running after a command writes a .env of its own in the workspace', async () => {
    expect(await run('echo MINE=1 > .env && echo wrote')).toBe('exit=0\nwrote');
    expect(await run('cat .env')).toBe('exit=0\nMINE=1');
  });

  it("can write in its workspace, the owner's files there included, and nowhere Parlor keeps its own", async () => {
    const out = await run(
      [
        'echo kept > inside.txt && echo wrote inside',
        'echo added >> notes/todo.txt && echo edited a file of the owner',
        'mkdir -p made/deeper && echo made folders',
        `echo lost > '${path.join(personasDir, 'tester', 'outside.txt')}'`,
        `echo lost > '${path.join(home, 'outside.txt')}'`,
      ].join('; '),
    );
    expect(out.split('\n').slice(1, 4)).toEqual(['wrote inside', 'edited a file of the owner', 'made folders']);
    expect(out.match(/outside\.txt: Permission denied/g)).toHaveLength(2);
    expect(fs.readFileSync(path.join(workspace, 'notes', 'todo.txt'), 'utf8')).toBe('written by the owner\nadded\n');
    // The owner's files stay the owner's: the workspace is given to the user's group, not to the user.
    const { uid, gid } = status.separateUser!;
    expect([fs.statSync(path.join(workspace, 'notes', 'todo.txt')).uid, fs.statSync(workspace).uid]).toEqual([0, 0]);
    expect([fs.statSync(workspace).gid, fs.statSync(path.join(workspace, 'notes')).gid]).toEqual([gid, gid]);
    expect(fs.statSync(path.join(workspace, 'inside.txt')).uid).toBe(uid);
    expect(fs.existsSync(path.join(personasDir, 'tester', 'outside.txt'))).toBe(false);
    expect(fs.existsSync(path.join(home, 'outside.txt'))).toBe(false);
  });

  it('can clear out a folder Parlor made in the workspace after the first command (uploads)', async () => {
    await run('true');
    fs.mkdirSync(path.join(workspace, 'uploads'), { mode: 0o755 });
    fs.writeFileSync(path.join(workspace, 'uploads', 'photo.jpg'), 'jpeg');
    expect(await run('rm uploads/photo.jpg && echo removed')).toBe('exit=0\nremoved');
  });

  it('is used even for a persona that opted in to running unsandboxed', async () => {
    const optedIn = makePersona({ ...persona, tools: { shell: 'unsandboxed' } });
    expect(shellAccess(optedIn, status)).toEqual({ mode: 'separate-uid' });
    const out = await run('id -u', optedIn);
    expect(out).toBe(`exit=0\n${status.separateUser!.uid}`);
  });

  it('starts in a workspace whose folders above are closed to the user, and warns that its path cannot be used', async () => {
    const closed = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-closed-')));
    try {
      const hidden = makePersona({ name: 'hidden', dir: path.join(closed, 'hidden'), workspace: path.join(closed, 'hidden', 'workspace') });
      const access = shellAccess(hidden, status);
      expect(access).toEqual({
        mode: 'separate-uid',
        warning:
          `shell_exec for persona hidden runs as the parlor-shell user, who cannot enter ${closed}: commands start in the workspace ` +
          'but cannot reach it by its full path or through $HOME (keep the personas folder where other users can pass through)',
      });
      const out = (await shell.run({ command: 'echo here > here.txt && cat here.txt; pwd; ls "$HOME" >/dev/null 2>&1 || echo no home' }, makeToolContext({ persona: hidden }))) as string;
      expect(out).toBe(`exit=0\nhere\n${hidden.workspace}\nno home`);
    } finally {
      fs.rmSync(closed, { recursive: true, force: true });
    }
  });

  it('falls back to nobody when its own user cannot be made, and says so', () => {
    const fallback = detectShellIsolation({ path: NO_BWRAP, user: { name: 'parlor-test-never-made', useradd: [] } });
    expect(fallback.separateUser).toMatchObject({ name: 'nobody', uid: findShellUser({ name: 'nobody' })!.uid });
    expect(fallback.detail).toBe('bubblewrap is not installed (apt install bubblewrap); commands run as the nobody user (parlor-test-never-made could not be made: no useradd here)');
    expect(shellAccess(persona, fallback).warning).toBe(
      'shell_exec for persona tester runs as the nobody user, which other programs may share, because ' +
        'parlor-test-never-made could not be made: no useradd here (useradd --system --user-group parlor-shell makes it)',
    );
  });
});

describe('shell_exec without bubblewrap and without root', () => {
  const status = () => detectShellIsolation({ path: NO_BWRAP, root: false });
  const shell = createShellExecTool({ sandbox: { status } });

  it('has no user to run commands as, so it stays off unless the persona opted in', async () => {
    expect(status()).toEqual({ available: false, detail: 'bubblewrap is not installed (apt install bubblewrap)' });
    expect(shell.available?.({ persona, kind: 'user' })).toBe(false);
    expect(await shell.run({ command: 'touch never-ran' }, makeToolContext({ persona }))).toBe(
      'error: shell_exec is off for persona tester: bubblewrap is not installed (apt install bubblewrap), or set "shell": "unsandboxed" in its tools.jsonc; the command did not run.',
    );
    expect(fs.existsSync(path.join(workspace, 'never-ran'))).toBe(false);
  });

  it("runs directly, as Parlor's own user, for a persona that opted in", async () => {
    const optedIn = makePersona({ ...persona, tools: { shell: 'unsandboxed' } });
    expect(shellAccess(optedIn, status()).mode).toBe('unsandboxed');
    expect(await shell.run({ command: 'id -u; cat ../.env' }, makeToolContext({ persona: optedIn }))).toBe(`exit=0\n${process.getuid?.()}\nTOKEN=${SECRET}`);
  });
});
