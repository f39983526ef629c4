// Commands shell_exec refuses outright, before any approval question. This is a seatbelt against the obviously
// catastrophic, read from the command's shell words (so `'rm'`, `r\m`, `/bin/rm`, `sudo rm`, `x=/; rm -rf $x` and
// `sh -c 'rm -rf /'` are all `rm -rf /`), and it can never be complete: a shell is a programming language. The
// guards are the approval a person gives after reading the whole command, and the sandbox the command runs in.
import { allCommands, joinPath, parseScript, ShellWordsError, texts, type SimpleCommand, type Word } from './shell-words.ts';
import { interpreterCall, isShell, unwrapCommand, type InterpreterCall } from './shell-programs.ts';

const DISK = /^\/dev\/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|dm-|md\d|mapper\/)/;
const SYSTEM_FOLDERS = new Set(['bin', 'boot', 'dev', 'etc', 'home', 'lib', 'lib32', 'lib64', 'libx32', 'opt', 'proc', 'root', 'run', 'sbin', 'srv', 'sys', 'usr', 'var']);
const DOWNLOADERS = new Set(['curl', 'wget', 'fetch', 'http', 'https', 'xh', 'nc', 'ncat', 'socat']);
// The name is bounded and must start a word: unbounded, a long word made the test quadratic (40,000 characters: 4 s).
const FORK_BOMB = /(?<![\w.:-])([\w.:-]{1,64})\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&/;
const MAX_NESTING = 8;

/** Why a command is refused without asking anyone, or undefined when it may go on to approval and run. */
export function deniedReason(command: string): string | undefined {
  if (/[\0\u0001\u0002\u0003]/.test(command)) return 'it holds control characters (NUL, \\x01-\\x03) that would hide what runs';
  if (FORK_BOMB.test(command)) return 'a fork bomb';
  return checkScript(command, undefined, 0);
}

function checkScript(script: string, vars: SimpleCommand['vars'] | undefined, depth: number): string | undefined {
  if (depth > MAX_NESTING) return 'shells nested too deeply to check';
  let commands: SimpleCommand[];
  try {
    commands = parseScript(script, vars);
  } catch (err) {
    if (err instanceof ShellWordsError) return `it cannot be read as shell words (${err.message})`;
    throw err;
  }
  for (const command of allCommands(commands)) {
    const reason = checkCommand(command, depth);
    if (reason) return reason;
  }
  return undefined;
}

function checkCommand(command: SimpleCommand, depth: number): string | undefined {
  for (const redirect of command.redirects) {
    if (/^(?:>|>>|>\||&>|&>>|<>|>&)$/.test(redirect.op) && DISK.test(redirect.target.text)) return 'writing raw data over a disk';
  }
  const words = unwrapCommand(command.words);
  if (words.length === 0) return undefined;
  const name = commandName(words[0]!.text);
  const args = texts(words.slice(1));

  if (['rm', 'chmod', 'chown', 'chgrp'].includes(name) && args.includes('--no-preserve-root')) {
    return '--no-preserve-root turns off the guard against deleting /';
  }
  if (name === 'rm' && isRecursive(args, /^-[a-zA-Z]*[rR]/)) return wideTarget(operands(args), command.cwd, 'recursively deleting');
  if (['chmod', 'chown', 'chgrp'].includes(name) && isRecursive(args, /^-[a-zA-Z]*R/)) {
    const target = operands(args).slice(1).map((arg) => widePath(arg, command.cwd)).find((kind) => kind && kind !== 'home');
    if (target) return 'recursively changing permissions or ownership of the whole filesystem';
  }
  if (name === 'find') return checkFind(args, command.cwd);
  if (/^mk(?:fs|e2fs|swap)(?:\..+)?$/.test(name) || name === 'wipefs') return 'formatting a filesystem';
  if (name === 'dd' && args.some((arg) => arg.startsWith('of=') && DISK.test(arg.slice(3)))) return 'writing raw data over a disk';
  if (['tee', 'cp', 'shred'].includes(name) && args.some((arg) => DISK.test(arg))) return 'writing raw data over a disk';
  if (['shutdown', 'reboot', 'halt', 'poweroff'].includes(name) || (name === 'systemctl' && args.some((arg) => /^(?:reboot|poweroff|halt|kexec)$/.test(arg)))) {
    return 'shutting down or rebooting the machine';
  }
  if ((name === 'init' || name === 'telinit') && /^[06]$/.test(args[0] ?? '')) return 'shutting down or rebooting the machine';
  if (name === 'kill' && killsEveryProcess(args)) return 'signalling every process (kill -1)';

  if (name === 'eval') {
    if (words.slice(1).some(fetched)) return 'running a downloaded script straight from the network';
    return checkScript(args.join(' '), command.vars, depth + 1);
  }
  if (name === 'su' || name === 'runuser') {
    const code = args[args.findIndex((arg) => arg === '-c' || arg === '--command') + 1];
    return code === undefined ? undefined : checkScript(code, command.vars, depth + 1);
  }
  if (name === 'watch') return checkScript(operands(args.filter((arg, i) => !(args[i - 1] === '-n' || args[i - 1] === '--interval'))).join(' '), command.vars, depth + 1);
  if (name === '.' || name === 'source') {
    if (words[1] && fetched(words[1])) return 'running a downloaded script straight from the network';
    if (/^(?:\/dev\/stdin|\/proc\/self\/fd\/0|-)$/.test(args[0] ?? '')) return checkStdin(command, name, true);
    return undefined;
  }
  const call = interpreterCall(name, words.slice(1));
  return call ? checkInterpreter(command, name, call, depth) : undefined;
}

/** A shell, python, perl, node... given code to run: refused when that code comes from the network or a decoder. */
function checkInterpreter(command: SimpleCommand, name: string, call: InterpreterCall, depth: number): string | undefined {
  if (call.code) {
    if (fetched(call.code)) return 'running a downloaded script straight from the network';
    if (isShell(name)) return checkScript(call.code.text, command.vars, depth + 1);
    return undefined;
  }
  if (call.script) return fetched(call.script) ? 'running a downloaded script straight from the network' : undefined;
  const stdin = checkStdin(command, name, isShell(name));
  if (stdin) return stdin;
  // `bash <<EOF ... EOF` and `sh <<< '...'`: the here-document is the script.
  if (isShell(name)) {
    for (const redirect of command.redirects) {
      if (redirect.op === '<<<') {
        const reason = checkScript(redirect.target.text, command.vars, depth + 1);
        if (reason) return reason;
      }
    }
  }
  return undefined;
}

/** The program read from standard input: what the pipeline feeds it, or a redirect from a download. */
function checkStdin(command: SimpleCommand, name: string, shell: boolean): string | undefined {
  const into = shell ? 'a shell' : `an interpreter (${name})`;
  for (const redirect of command.redirects) {
    if ((redirect.op === '<' || redirect.op === '<<<') && fetched(redirect.target)) return `piping a download straight into ${into}`;
  }
  for (const earlier of command.pipeline.slice(0, command.pipeline.indexOf(command))) {
    const source = producer(earlier);
    if (source === 'download') return `piping a download straight into ${into}`;
    if (source === 'decoder') return `piping decoded data straight into ${into}`;
  }
  return undefined;
}

/** Whether a word holds the output of a download or a decoder (`"$(curl ...)"`, `<(wget ...)`). */
function fetched(word: Word): boolean {
  return word.substitutions.some((commands) => [...allCommands(commands)].some((inner) => producer(inner) !== undefined));
}

/** Commands whose output is fetched or hidden code: downloads, and decoders (`base64 -d`, `xxd -r`, `printf '\x..'`). */
function producer(command: SimpleCommand): 'download' | 'decoder' | undefined {
  const words = unwrapCommand(command.words);
  if (words.length === 0) return undefined;
  const name = commandName(words[0]!.text);
  const args = texts(words.slice(1));
  if (DOWNLOADERS.has(name)) return 'download';
  if (['base64', 'base32', 'basenc'].includes(name) && args.some((arg) => arg === '--decode' || /^-[a-zA-Z]*[dD]/.test(arg))) return 'decoder';
  if (name === 'xxd' && args.some((arg) => /^-[a-z]*r/.test(arg) || arg === '-revert')) return 'decoder';
  if (name === 'openssl' && args.some((arg) => arg === '-d' || arg === '-base64')) return 'decoder';
  if (name === 'uudecode') return 'decoder';
  if ((name === 'printf' || name === 'echo') && args.some((arg) => /\\(?:x[0-9a-fA-F]|[0-7]{3}|u[0-9a-fA-F])/.test(arg))) return 'decoder';
  return undefined;
}

function checkFind(args: string[], cwd: string | undefined): string | undefined {
  let i = 0;
  while (i < args.length && /^-(?:[HLP]|D|O\d?)$/.test(args[i]!)) i += args[i] === '-D' ? 2 : 1;
  const starts: string[] = [];
  while (i < args.length && !/^[-(!,]/.test(args[i]!)) starts.push(args[i++]!);
  const expression = args.slice(i);
  const deletes =
    expression.includes('-delete') ||
    expression.some((arg, j) => /^-(?:exec|execdir|ok|okdir)$/.test(arg) && /^(?:rm|shred|unlink)$/.test(commandName(expression[j + 1] ?? '')));
  if (!deletes) return undefined;
  const wide = (starts.length ? starts : ['.']).map((start) => widePath(start, cwd)).find(Boolean);
  return wide ? `deleting files from ${wide === 'home' ? 'the home directory' : wide === 'root' ? '/' : wide} with find (start it from a narrower folder)` : undefined;
}

/** `kill [-s SIG | -SIG] [--] pid...` with pid -1: every process the user may signal. */
function killsEveryProcess(args: string[]): boolean {
  let i = 0;
  if (args[i] === '-s' || args[i] === '-n') i += 2;
  else if (args[i]?.startsWith('-') && args[i] !== '--' && args[i] !== '-1') i += 1;
  else if (args[i] === '-1' && args.length > 1) i += 1;
  if (args[i] === '--') i += 1;
  return args.slice(i).includes('-1');
}

function wideTarget(targets: string[], cwd: string | undefined, doing: string): string | undefined {
  for (const target of targets) {
    const kind = widePath(target, cwd);
    if (kind === 'root' || kind === 'home') return `${doing} the root or home directory`;
    if (kind) return `${doing} the system folder ${kind}`;
  }
  return undefined;
}

/** 'root', 'home', a top-level system folder (`/usr`), or undefined for a narrower path. Trailing `*` count as the folder. */
function widePath(target: string, cwd: string | undefined): string | undefined {
  if (target === '') return undefined;
  let resolved = joinPath(cwd, target);
  if (resolved === undefined) return undefined;
  while (/\/\.?\*+$/.test(resolved)) resolved = resolved.replace(/\/\.?\*+$/, '') || '/';
  if (resolved === '~*' || resolved === '~.*') resolved = '~';
  if (resolved === '/' || resolved === '') return 'root';
  if (resolved === '~') return 'home';
  if (/^\/[^/]+$/.test(resolved) && SYSTEM_FOLDERS.has(resolved.slice(1))) return resolved;
  return undefined;
}

function isRecursive(args: string[], flag: RegExp): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((arg) => arg === '--recursive' || (!arg.startsWith('--') && flag.test(arg)));
}

/** The arguments that are not options (everything after `--`). */
function operands(args: string[]): string[] {
  const end = args.indexOf('--');
  const before = end < 0 ? args : args.slice(0, end);
  return [...before.filter((arg) => !arg.startsWith('-') || arg === '-'), ...(end < 0 ? [] : args.slice(end + 1))];
}

/** The program a command word names: `/bin/rm` and `./rm` are `rm`. */
export function commandName(word: string): string {
  return word.slice(word.lastIndexOf('/') + 1);
}
