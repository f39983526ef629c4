// What the sandbox hides under the system folders it shows: a persona folder that the personas folder links to from
// /opt, and files under /opt that only root may read. The fixtures live in a temp folder of the test's own under
// /opt. The sandbox keeps its scan of /opt for a while, but not past a change of /opt itself (a folder made there).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { sandboxedCommand, shellSandboxStatus } from '../../src/tools/sandbox.ts';
import type { Tool } from '../../src/tools/types.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { createShellExecTool } from '../../tools/shell-exec.ts';
import { formatCommandResult, startCommand, type RunOptions } from '../../tools/shell-process.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

const SECRET = 'persona-secret-marker-71d2';
const canWriteOpt = (() => {
  try {
    fs.accessSync('/opt', fs.constants.W_OK);
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
})();

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-sandbox-hide-')));
const home = path.join(root, '.parlor');
const personasDir = path.join(root, 'personas');
const envFile = path.join(root, '.env');
const workspace = path.join(personasDir, 'tester', 'workspace');
fs.mkdirSync(home);
fs.mkdirSync(workspace, { recursive: true });
// Under /opt, readable by everyone, as a checkout would be: only the hide list keeps it from the sandbox.
const opt = canWriteOpt ? fs.mkdtempSync('/opt/parlor-sandbox-test-') : '';
const linked = path.join(opt, 'linked');
const tool = path.join(opt, 'tool');
if (canWriteOpt) {
  fs.chmodSync(opt, 0o755);
  fs.mkdirSync(path.join(linked, 'workspace'), { recursive: true, mode: 0o755 });
  fs.writeFileSync(path.join(linked, '.env'), `TOKEN=${SECRET}\n`, { mode: 0o644 });
  fs.writeFileSync(path.join(linked, 'SOUL.md'), `You are ${SECRET}.`, { mode: 0o644 });
  fs.symlinkSync(linked, path.join(personasDir, 'linked'));
  fs.mkdirSync(tool, { mode: 0o755 });
  fs.writeFileSync(path.join(tool, 'secret.key'), SECRET, { mode: 0o600 });
  fs.writeFileSync(path.join(tool, 'README'), 'readable by all', { mode: 0o644 });
}

afterAll(() => {
  if (opt) fs.rmSync(opt, { recursive: true, force: true });
  fs.rmSync(root, { recursive: true, force: true });
});

const persona = makePersona({ name: 'tester', dir: path.join(personasDir, 'tester'), workspace });
const run = (shell: Tool, command: string) => shell.run({ command }, makeToolContext({ persona })) as Promise<string>;

describe.skipIf(!canWriteOpt || !shellSandboxStatus().available)('the sandbox under /opt (needs bubblewrap and root)', () => {
  it('hides a persona folder the personas folder links to from /opt, .env and all', async () => {
    // What the app hides today: its home, the personas folder, the environment file.
    const shell = createShellExecTool({ sandbox: { hide: [home, personasDir, envFile] } });
    // One stream (2>&1), so the count comes last whatever the order stdout and stderr are read in.
    const out = await run(shell, `cat '${path.join(linked, '.env')}' '${path.join(linked, 'SOUL.md')}' 2>&1; ls '${linked}' 2>&1 | wc -l`);
    expect(out.includes(SECRET)).toBe(false);
    expect(out.split('\n').at(-1)).toBe('0');
  });

  it('hides the persona folders it is given wherever their symlinks lead', async () => {
    const shell = createBuiltinTools({ timezone: 'UTC', shellSandbox: { hide: [] }, personaDirs: [path.join(personasDir, 'linked')] }).find((t) => t.name === 'shell_exec')!;
    const out = await run(shell, `cat '${path.join(linked, '.env')}'`);
    expect(out.includes(SECRET)).toBe(false);
  });

  it('runs a persona whose own folder is linked from /opt in its workspace, without its .env', async () => {
    const shell = createShellExecTool({ sandbox: { hide: [home, personasDir, envFile] } });
    const own = makePersona({ name: 'linked', dir: path.join(personasDir, 'linked'), workspace: path.join(personasDir, 'linked', 'workspace') });
    const out = (await shell.run({ command: 'echo kept > note.txt && cat note.txt; cat ../.env ../SOUL.md 2>&1 | grep -c "No such file"' }, makeToolContext({ persona: own }))) as string;
    expect(out).toBe('exit=0\nkept\n2');
    expect(fs.readFileSync(path.join(linked, 'workspace', 'note.txt'), 'utf8')).toBe('kept\n');
  });

  it('masks files under /opt that only root may read, and leaves the rest readable', async () => {
    const shell = createShellExecTool({ sandbox: { hide: [home, personasDir, envFile] } });
    const out = await run(shell, `cat '${path.join(tool, 'secret.key')}' 2>/dev/null || echo masked; cat '${path.join(tool, 'README')}'`);
    expect(out.includes(SECRET)).toBe(false);
    expect(out).toBe('exit=0\nmasked\nreadable by all');
  });

  it('masks what is installed under /opt after a scan, at the next command', async () => {
    const shell = createShellExecTool({ sandbox: { hide: [home, personasDir, envFile] } });
    expect(await run(shell, 'true')).toBe('exit=0\n(no output)');
    const later = fs.mkdtempSync('/opt/parlor-sandbox-later-');
    try {
      fs.chmodSync(later, 0o755);
      fs.writeFileSync(path.join(later, 'secret.key'), SECRET, { mode: 0o600 });
      const out = await run(shell, `cat '${path.join(later, 'secret.key')}' 2>/dev/null || echo masked`);
      expect(out).toBe('exit=0\nmasked');
    } finally {
      fs.rmSync(later, { recursive: true, force: true });
    }
  });

  describe('a file to mask that goes away between the arguments and the start', () => {
    const start = (made: { file: string; args: string[] }, again?: RunOptions['again']) =>
      startCommand({ ...made, sandboxed: true, ...(again ? { again } : {}), cwd: workspace, env: { PATH: '/usr/bin:/bin' }, timeoutMs: 10_000, signal: new AbortController().signal });
    const runs = path.join(workspace, 'runs.txt');
    let gone = '';
    /** Arguments made while a root-only file under /opt is there (so they mask it), then the file removed. */
    const staleArguments = (argv: string[]) => {
      gone = fs.mkdtempSync('/opt/parlor-sandbox-gone-');
      fs.chmodSync(gone, 0o755);
      const secret = path.join(gone, 'secret.key');
      fs.writeFileSync(secret, SECRET, { mode: 0o600 });
      const made = sandboxedCommand(argv, { workspace, cwd: workspace })!;
      expect(made.args).toContain(secret);
      fs.rmSync(secret);
      return made;
    };
    afterEach(() => {
      fs.rmSync(gone, { recursive: true, force: true });
      fs.rmSync(runs, { force: true });
    });

    it('keeps bubblewrap from setting the sandbox up: the command does not run', async () => {
      const command = await start(staleArguments(['/bin/sh', '-c', 'echo ran >> runs.txt']));
      const exit = await command.exited;
      expect(exit.status).toBe('1');
      expect(command.output.headText().text).toMatch(/^bwrap: /);
      expect(fs.existsSync(runs)).toBe(false);
    });

    it('runs the command once, on fresh arguments', async () => {
      const argv = ['/bin/sh', '-c', 'echo ran >> runs.txt; cat runs.txt'];
      const command = await start(staleArguments(argv), () => sandboxedCommand(argv, { workspace, cwd: workspace }));
      expect(formatCommandResult(await command.exited, command.output)).toBe('exit=0\nran');
      expect(fs.readFileSync(runs, 'utf8')).toBe('ran\n');
    });

    it('never runs again a command that ran and failed, whatever it said', async () => {
      const argv = ['/bin/sh', '-c', 'echo ran >> runs.txt; echo "bwrap: Can\'t create file at /opt/x" >&2; exit 1'];
      const made = sandboxedCommand(argv, { workspace, cwd: workspace })!;
      const command = await start(made, () => sandboxedCommand(argv, { workspace, cwd: workspace }));
      expect((await command.exited).status).toBe('1');
      expect(fs.readFileSync(runs, 'utf8')).toBe('ran\n');
    });
  });
});
