// What a few programs do with their arguments, for the deny list: the wrappers that run another command
// (`sudo rm ...`, `env -i rm ...`), and the interpreters that run code (`sh -c CODE`, `python3 SCRIPT`, or a program
// read from standard input).
import { parse } from 'shell-quote';
import type { Word } from './shell-words.ts';

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'fish', 'rbash']);
const RESERVED = new Set(['if', 'then', 'else', 'elif', 'while', 'until', 'do', '!', '{', '}']);

/** For each wrapper: its options that take a value, and whether it runs its first operand as a command. */
const WRAPPERS: Record<string, { valued: string[]; skipOperands?: number }> = {
  sudo: { valued: ['-u', '-g', '-h', '-p', '-C', '-D', '-r', '-t', '-U', '-T', '--user', '--group', '--host', '--prompt', '--chdir', '--role', '--type', '--other-user'] },
  doas: { valued: ['-u', '-C'] },
  env: { valued: ['-u', '--unset', '-C', '--chdir', '-P'] },
  command: { valued: [] },
  builtin: { valued: [] },
  exec: { valued: ['-a'] },
  nohup: { valued: [] },
  time: { valued: ['-f', '-o', '--format', '--output'] },
  nice: { valued: ['-n', '--adjustment'] },
  ionice: { valued: ['-c', '-n', '--class', '--classdata'] },
  timeout: { valued: ['-s', '-k', '--signal', '--kill-after'], skipOperands: 1 },
  stdbuf: { valued: ['-i', '-o', '-e', '--input', '--output', '--error'] },
  setsid: { valued: [] },
  chronic: { valued: [] },
  unbuffer: { valued: [] },
  busybox: { valued: [] },
  xargs: { valued: ['-I', '-n', '-P', '-d', '-E', '-L', '-s', '-a', '--max-args', '--max-procs', '--delimiter', '--arg-file', '--max-lines', '--max-chars'] },
  flock: { valued: ['-w', '--timeout', '-E', '--conflict-exit-code'], skipOperands: 1 },
};

/** The words of the command that actually runs: `sudo -u x env A=1 nohup /bin/rm -rf /` is `/bin/rm -rf /`. */
export function unwrapCommand(words: Word[]): Word[] {
  let rest = words;
  for (let hops = 0; hops < 16 && rest.length > 0; hops++) {
    const name = rest[0]!.text.slice(rest[0]!.text.lastIndexOf('/') + 1);
    if (RESERVED.has(name)) {
      rest = rest.slice(1);
      continue;
    }
    const wrapper = WRAPPERS[name];
    if (!wrapper) return rest;
    // `command -v rm` and `env` alone run nothing.
    if (name === 'command' && rest.some((word) => word.text === '-v' || word.text === '-V')) return [];
    let i = 1;
    while (i < rest.length) {
      const arg = rest[i]!.text;
      if (arg === '--') {
        i++;
        break;
      }
      if (name === 'env' && (arg === '-S' || arg === '--split-string')) {
        // `env -S 'rm -rf /'` splits its argument into the command.
        const split = parse(rest[i + 1]?.text ?? '').filter((entry): entry is string => typeof entry === 'string');
        rest = [...split.map((text) => ({ text, substitutions: rest[i + 1]!.substitutions })), ...rest.slice(i + 2)];
        i = 0;
        break;
      }
      if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(arg) && (name === 'env' || name === 'sudo')) i++;
      else if (arg.startsWith('-') && arg.length > 1) i += wrapper.valued.includes(arg) ? 2 : 1;
      else break;
    }
    rest = rest.slice(i + (i === 0 ? 0 : (wrapper.skipOperands ?? 0)));
  }
  return rest;
}

export function isShell(name: string): boolean {
  return SHELLS.has(name);
}

/** Where an interpreter takes its program from: inline code, a script operand, or (neither) standard input. */
export interface InterpreterCall {
  code?: Word;
  script?: Word;
}

interface InterpreterSpec {
  /** Option letters after which the rest of the cluster, or the next argument, is code. */
  codeLetters: string;
  codeLong?: string[];
  /** Options that take a value as the next argument. */
  valued: string[];
  /** Letters that end option parsing and read the program from standard input (`bash -s`). */
  stdinLetters?: string;
}

const SHELL_SPEC: InterpreterSpec = { codeLetters: 'c', valued: ['-o', '+o', '-O', '+O', '--rcfile', '--init-file'], stdinLetters: 's' };

function specFor(name: string): InterpreterSpec | undefined {
  if (SHELLS.has(name)) return SHELL_SPEC;
  if (/^python[\d.]*$/.test(name) || name === 'pypy3') return { codeLetters: 'cm', valued: ['-W', '-X', '--check-hash-based-pycs'] };
  if (name === 'perl') return { codeLetters: 'eE', valued: ['-I', '-M', '-m'] };
  if (name === 'ruby') return { codeLetters: 'e', valued: ['-I', '-r', '-C', '-E'] };
  if (name === 'node' || name === 'nodejs') return { codeLetters: 'ep', codeLong: ['--eval', '--print'], valued: ['-r', '--require', '--import', '--loader', '-C', '--conditions'] };
  if (name === 'php') return { codeLetters: 'rBRE', valued: ['-d', '-c', '-z', '-f'] };
  if (name === 'lua' || name === 'luajit') return { codeLetters: 'e', valued: ['-l'] };
  return undefined;
}

/** How an interpreter named `name` is called with `args`; undefined when `name` is not an interpreter. */
export function interpreterCall(name: string, args: Word[]): InterpreterCall | undefined {
  const spec = specFor(name);
  if (!spec) return undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.text;
    if (arg === '-' || arg === '/dev/stdin' || arg === '/proc/self/fd/0') return {};
    if (arg === '--') return args[i + 1] ? { script: args[i + 1] } : {};
    if (spec.codeLong?.includes(arg)) return { code: args[i + 1] ?? { text: '', substitutions: [] } };
    if (spec.valued.includes(arg)) {
      i++;
      continue;
    }
    if (/^[-+]/.test(arg) && arg.length > 1) {
      if (arg.startsWith('--')) continue;
      const letters = arg.slice(1);
      for (let j = 0; j < letters.length; j++) {
        if (spec.codeLetters.includes(letters[j]!)) {
          // `-c CODE`, `-ec CODE`; `-e'code'` attached for perl and friends.
          const attached = letters.slice(j + 1);
          if (attached && !SHELLS.has(name)) return { code: { text: attached, substitutions: args[i]!.substitutions } };
          const rest = args.slice(i + 1).find((word) => !/^-[a-zA-Z]+$/.test(word.text)) ?? args[i + 1];
          return { code: rest ?? { text: '', substitutions: [] } };
        }
        if (spec.stdinLetters?.includes(letters[j]!)) return {};
      }
      continue;
    }
    return { script: args[i] };
  }
  return {};
}
