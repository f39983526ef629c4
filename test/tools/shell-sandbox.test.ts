import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sandboxedCommand, shellAccess, shellMode, shellSandboxStatus } from '../../src/tools/sandbox.ts';
import { createShellExecTool } from '../../tools/shell-exec.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import { NO_SANDBOX, recordingLogger } from './shell-helpers.ts';

// A layout like a real install: Parlor's home with the embedded Postgres password, the environment file, and the
// personas folder with each persona's .env and SOUL.md beside its workspace.
let root: string;
let home: string;
let personasDir: string;
let workspace: string;
let envFile: string;
let persona: ReturnType<typeof makePersona>;
const SECRET = 'parlor-secret-marker-4f1c';

beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-sandbox-')));
  home = path.join(root, '.parlor');
  personasDir = path.join(root, 'personas');
  workspace = path.join(personasDir, 'tester', 'workspace');
  envFile = path.join(root, '.env');
  fs.mkdirSync(home);
  fs.writeFileSync(path.join(home, 'postgres.json'), JSON.stringify({ port: 5432, password: SECRET }));
  fs.writeFileSync(envFile, `LLM_API_KEY=${SECRET}\n`);
  fs.mkdirSync(workspace, { recursive: true });
  fs.writeFileSync(path.join(personasDir, 'tester', '.env'), `GITHUB_TOKEN=${SECRET}\n`);
  fs.writeFileSync(path.join(personasDir, 'tester', 'SOUL.md'), `You are ${SECRET}.`);
  fs.mkdirSync(path.join(personasDir, 'other', 'workspace'), { recursive: true });
  fs.writeFileSync(path.join(personasDir, 'other', '.env'), `TOKEN=${SECRET}\n`);
  fs.writeFileSync(path.join(personasDir, 'other', 'workspace', 'diary.txt'), SECRET);
  persona = makePersona({ name: 'tester', dir: path.join(personasDir, 'tester'), workspace });
});
afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe.skipIf(!shellSandboxStatus().available)('shell_exec in the sandbox (needs bubblewrap)', () => {
  const shell = createShellExecTool({ sandbox: { hide: [home, personasDir, envFile] } });
  const run = (command: string) => shell.run({ command }, makeToolContext({ persona })) as Promise<string>;
  const SYSTEM_FILES = ['/usr', '/etc', '/opt'].filter((folder) => fs.existsSync(folder)).map((folder) => `${folder}/parlor-sandbox-test-${process.pid}`);

  afterEach(() => {
    delete process.env.PARLOR_SANDBOX_TEST_SECRET;
    // Only a broken sandbox leaves these; do not leave them on the machine as well.
    for (const file of SYSTEM_FILES) fs.rmSync(file, { force: true });
  });

  it("cannot read Parlor's own environment through /proc", async () => {
    process.env.PARLOR_SANDBOX_TEST_SECRET = SECRET;
    const out = await run('cat /proc/$PPID/environ; cat /proc/*/environ; tr "\\0" "\\n" < /proc/1/environ; ls /proc | grep -c "^[0-9]"');
    // Compared as booleans: were this to fail, the output would hold the environment of every process around.
    expect(out.includes(SECRET)).toBe(false);
    expect(out.includes('PARLOR_SANDBOX_TEST_SECRET')).toBe(false);
    // Only the sandbox's own processes: its init, the shell and the few commands of the pipeline.
    expect(Number(out.trim().split('\n').at(-1))).toBeLessThan(8);
  });

  it("cannot read the persona's .env and SOUL.md, other personas, the environment file or Parlor's home", async () => {
    const out = await run(
      [
        'cat ../.env ../SOUL.md',
        `cat '${path.join(personasDir, 'other', '.env')}' '${path.join(personasDir, 'other', 'workspace', 'diary.txt')}'`,
        `cat '${envFile}'`,
        `cat '${path.join(home, 'postgres.json')}'`,
        `ls -a '${personasDir}' '${root}'`,
      ].join('; '),
    );
    expect(out).not.toContain(SECRET);
    expect(out).toMatch(/\.\.\/\.env: No such file or directory/);
    expect(out).toMatch(/postgres\.json: No such file or directory/);
  });

  it('can write in the workspace and nowhere else', async () => {
    const out = await run(
      [
        'echo kept > inside.txt && echo wrote inside',
        `echo lost > '${path.join(personasDir, 'tester', 'outside.txt')}' || true`,
        `echo lost > '${path.join(root, 'outside.txt')}' || true`,
        `touch ${SYSTEM_FILES.join(' ')} 2>&1 | grep -c "Read-only"`,
        'echo $HOME',
      ].join('; '),
    );
    expect(out).toContain('wrote inside');
    expect(fs.readFileSync(path.join(workspace, 'inside.txt'), 'utf8')).toBe('kept\n');
    expect(fs.existsSync(path.join(personasDir, 'tester', 'outside.txt'))).toBe(false);
    expect(fs.existsSync(path.join(root, 'outside.txt'))).toBe(false);
    expect(SYSTEM_FILES.filter((file) => fs.existsSync(file))).toEqual([]);
    expect(out.split('\n').slice(-2)).toEqual([String(SYSTEM_FILES.length), workspace]);
  });

  it('hides the given paths even under a folder the sandbox shows, and files others may not read', async () => {
    const hiding = createShellExecTool({ sandbox: { hide: ['/etc/hostname', '/usr/share'] } });
    const command = 'cat /etc/hostname >/dev/null 2>&1 || echo hostname hidden; ls /usr/share | wc -l; cat /etc/shadow >/dev/null 2>&1 || echo shadow hidden';
    const out = (await hiding.run({ command }, makeToolContext({ persona }))) as string;
    expect(out).toBe('exit=0\nhostname hidden\n0\nshadow hidden');
  });

  it('gives the command no capabilities, even when Parlor runs as root', async () => {
    // Harmless even where it would work: a copy of /dev/null and a mount inside the workspace.
    fs.mkdirSync(path.join(workspace, 'mnt'), { recursive: true });
    try {
      const out = await run('grep -E "^Cap(Prm|Eff)" /proc/self/status; mknod null-copy c 1 3 2>/dev/null && echo made a device; mount -t tmpfs none mnt 2>/dev/null && echo mounted');
      expect(out).toMatch(/^exit=\d+\nCapPrm:\t0+\nCapEff:\t0+$/);
    } finally {
      spawnSync('umount', [path.join(workspace, 'mnt')], { stdio: 'ignore' });
    }
  });

  it('cannot change kernel settings', async () => {
    // Writes the current value back, so nothing changes even where this test would fail.
    const out = await run('h=$(cat /proc/sys/kernel/hostname); echo "$h" > /proc/sys/kernel/hostname 2>/dev/null && echo wrote');
    expect(out).not.toContain('wrote');
  });

  it('is used even for a persona that opted out of it', async () => {
    process.env.PARLOR_SANDBOX_TEST_SECRET = SECRET;
    const optedOut = makePersona({ workspace, tools: { shell: 'unsandboxed' } });
    const out = (await shell.run({ command: 'cat /proc/$PPID/environ ../.env' }, makeToolContext({ persona: optedOut }))) as string;
    expect(out.includes(SECRET)).toBe(false);
  });

  it('starts a command only once it has said so on its descriptor (a run not known to have started may run again)', () => {
    const made = sandboxedCommand(['/bin/sh', '-c', 'echo ran > ran.txt'], { workspace, cwd: workspace })!;
    const said = spawnSync(made.file, made.args, { stdio: ['ignore', 'pipe', 'pipe', 'pipe'], encoding: 'utf8' });
    expect(said.status).toBe(0);
    expect(said.output[3]).toBe('.');
    expect(fs.readFileSync(path.join(workspace, 'ran.txt'), 'utf8')).toBe('ran\n');
    fs.rmSync(path.join(workspace, 'ran.txt'));
    // Without the descriptor: nothing runs.
    const unsaid = spawnSync(made.file, made.args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
    expect(unsaid.status).toBe(126);
    expect(fs.existsSync(path.join(workspace, 'ran.txt'))).toBe(false);
  });
});

describe('shell_exec without a sandbox', () => {
  const shell = createShellExecTool({ sandbox: { status: NO_SANDBOX } });

  it('is not offered, and runs nothing, unless the persona opted in', async () => {
    expect(shell.available?.({ persona, kind: 'user' })).toBe(false);
    const out = await shell.run({ command: 'touch never-ran' }, makeToolContext({ persona }));
    expect(out).toBe(
      'error: shell_exec is off for persona tester: bubblewrap is not installed (apt install bubblewrap), or set "shell": "unsandboxed" in its tools.jsonc; the command did not run.',
    );
    expect(fs.existsSync(path.join(workspace, 'never-ran'))).toBe(false);
  });

  it('runs directly for a persona that opted in, with one warning in the log', async () => {
    const optedIn = makePersona({ name: 'tester', workspace, tools: { shell: 'unsandboxed' } });
    expect(shell.available?.({ persona: optedIn, kind: 'user' })).toBe(true);
    const { log, warnings } = recordingLogger();
    for (let i = 0; i < 2; i++) {
      const ctx = { ...makeToolContext({ persona: optedIn }), log };
      expect(await shell.run({ command: 'cat ../.env' }, ctx)).toBe(`exit=0\nGITHUB_TOKEN=${SECRET}`);
    }
    expect(warnings).toEqual([
      `shell_exec runs unsandboxed for persona tester ("shell": "unsandboxed" in its tools.jsonc): bubblewrap is not installed (apt install bubblewrap); its commands can read Parlor's secrets`,
    ]);
  });
});

describe('the verdict doctor and start-up report', () => {
  const sandboxed = makePersona({ name: 'ana' });
  const optedIn = makePersona({ name: 'bo', tools: { shell: 'unsandboxed' } });
  const denied = makePersona({ name: 'cy', tools: { deny: ['shell_exec'] } });

  it('is the sandbox for everyone when there is one', () => {
    const status = { available: true, detail: 'bubblewrap 0.8.0' };
    expect([sandboxed, optedIn, denied].map((p) => shellAccess(p, status))).toEqual([{ mode: 'sandboxed' }, { mode: 'sandboxed' }, { mode: 'sandboxed' }]);
  });

  it('is a user of its own for every persona that may run commands when Parlor is root without bubblewrap', () => {
    const status = { ...NO_SANDBOX(), separateUser: { name: 'parlor-shell', uid: 999, gid: 995 } };
    expect([sandboxed, optedIn, denied].map((p) => shellAccess(p, status))).toEqual([{ mode: 'separate-uid' }, { mode: 'separate-uid' }, { mode: 'off' }]);
  });

  it('says what to do for each persona when there is none', () => {
    const status = NO_SANDBOX();
    expect(shellAccess(sandboxed, status)).toEqual({
      mode: 'off',
      warning: 'shell_exec is off for persona ana: bubblewrap is not installed (apt install bubblewrap), or set "shell": "unsandboxed" in its tools.jsonc',
    });
    expect(shellAccess(optedIn, status).mode).toBe('unsandboxed');
    expect(shellAccess(denied, status)).toEqual({ mode: 'off' });
  });

  it('is the same mode when asked on every turn, without looking at the disk (a workspace nobody can reach)', () => {
    const user = { name: 'parlor-shell', uid: 999, gid: 995 };
    const statuses = [{ available: true, detail: 'bubblewrap 0.8.0' }, { ...NO_SANDBOX(), separateUser: user }, NO_SANDBOX()];
    const unreachable = [sandboxed, optedIn, denied].map((p) => ({ ...p, workspace: '/nonexistent/parlor/workspace' }));
    for (const status of statuses) {
      expect(unreachable.map((p) => shellMode(p, status))).toEqual(unreachable.map((p) => shellAccess(p, status).mode));
    }
    const stat = vi.spyOn(fs, 'statSync');
    const realpath = vi.spyOn(fs, 'realpathSync');
    try {
      for (const status of statuses) for (const p of unreachable) shellMode(p, status);
      expect(stat).not.toHaveBeenCalled();
      expect(realpath).not.toHaveBeenCalled();
    } finally {
      stat.mockRestore();
      realpath.mockRestore();
    }
  });

  it('finds out whether bubblewrap works once, by a trial run', () => {
    const first = shellSandboxStatus();
    expect(shellSandboxStatus()).toBe(first);
    expect(first.detail).toMatch(first.available ? /^bubblewrap \d/ : /bubblewrap/);
  });
});
