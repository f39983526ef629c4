import path from 'node:path';
import { parse } from 'shell-quote';
import { lexScript } from './shell-lex.ts';

/** A word of a command after quote removal, with what the text tells of its variables. */
export interface Word {
  text: string;
  /** The command lists whose output became part of the word: `$(...)`, backticks, `<(...)`, variables set from them. */
  substitutions: SimpleCommand[][];
}

/** One simple command (`name args... <redirects>`) of a script, as far as its text tells what the shell would run. */
export interface SimpleCommand {
  /** The words after leading `NAME=value` assignments; unknown variables are empty, `$HOME` and `~` are `~`. */
  words: Word[];
  redirects: { op: string; target: Word }[];
  /** The pipeline the command is part of, itself included, in order. */
  pipeline: SimpleCommand[];
  /** The folder it runs in when an earlier `cd` makes it known (`~` for the home directory). */
  cwd?: string;
  /** The variables known at that point, for scripts it hands to another shell (`sh -c '...'`). */
  vars: ReadonlyMap<string, Word>;
}

export class ShellWordsError extends Error {
  override name = 'ShellWordsError';
}

const VAR = '\u0001';
const SUBSTITUTION = '\u0002';
const MAX_DEPTH = 8;
const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)\+?=([\s\S]*)$/;
const SEPARATORS = new Set([';', '&', '&&', '||', ';;', ';&', ';;&', '(', ')', '<(', '>(']);
const DECLARATIONS = new Set(['export', 'readonly', 'declare', 'typeset', 'local']);

interface Scope {
  vars: Map<string, Word>;
  cwd?: string;
}

/**
 * Splits a script into its simple commands, the way `sh` reads it: quotes, escapes, comments, new lines, `;`, `&&`,
 * `||`, `|`, `&`, subshells and groups; command and process substitutions become the substitutions of the word
 * they are in; simple assignments and `cd` are followed in order. Throws ShellWordsError on what it cannot read.
 */
export function parseScript(script: string, inherited?: ReadonlyMap<string, Word>, depth = 0): SimpleCommand[] {
  if (depth > MAX_DEPTH) throw new ShellWordsError('substitutions nested too deeply to read');
  const { text, substitutions } = lexScript(script);
  let tokens: ReturnType<typeof parse>;
  try {
    tokens = parse(text, (key) => `${VAR}${key}${VAR}`);
  } catch (err) {
    throw new ShellWordsError((err as Error).message);
  }
  const scope: Scope = { vars: new Map(inherited) };
  const resolve = (raw: string) => resolveWord(raw, scope, substitutions, depth);

  const commands: SimpleCommand[] = [];
  let pipeline: SimpleCommand[] = [];
  let words: Word[] = [];
  let assignments: [string, Word][] = [];
  let redirects: SimpleCommand['redirects'] = [];
  let redirectOp: string | undefined;

  const endCommand = () => {
    for (const [name, value] of assignments) scope.vars.set(name, value);
    if (words.length > 0 || redirects.length > 0) {
      const command: SimpleCommand = { words, redirects, pipeline, cwd: scope.cwd, vars: new Map(scope.vars) };
      pipeline.push(command);
      commands.push(command);
      follow(command, scope);
    }
    words = [];
    assignments = [];
    redirects = [];
    redirectOp = undefined;
  };

  for (const token of tokens) {
    if (typeof token === 'string' || (typeof token === 'object' && 'op' in token && token.op === 'glob')) {
      const raw = typeof token === 'string' ? token : (token as { pattern: string }).pattern;
      if (redirectOp) {
        redirects.push({ op: redirectOp, target: resolve(raw) });
        redirectOp = undefined;
        continue;
      }
      const assignment = words.length === 0 ? ASSIGNMENT.exec(raw) : null;
      if (assignment) assignments.push([assignment[1]!, resolve(assignment[2]!)]);
      else words.push(resolve(raw));
    } else if ('op' in token) {
      const op = token.op as string;
      if (op === '|' || op === '|&') {
        endCommand();
      } else if (SEPARATORS.has(op)) {
        endCommand();
        pipeline = [];
      } else {
        redirectOp = op;
      }
    }
    // Comments are removed by the lexer; shell-quote reports none.
  }
  endCommand();
  return commands;
}

/** Every command a script runs, substitutions included (`echo $(rm -rf /)` runs `rm`). */
export function* allCommands(commands: SimpleCommand[]): Generator<SimpleCommand> {
  for (const command of commands) {
    yield command;
    for (const word of [...command.words, ...command.redirects.map((r) => r.target)]) {
      for (const inner of word.substitutions) yield* allCommands(inner);
    }
  }
}

/** The words as plain text. */
export function texts(words: Word[]): string[] {
  return words.map((word) => word.text);
}

/** Assignments made by `export NAME=value` and friends, and the folder `cd` moves to. */
function follow(command: SimpleCommand, scope: Scope): void {
  const [name, ...args] = texts(command.words);
  if (name && DECLARATIONS.has(name)) {
    command.words.slice(1).forEach((word) => {
      const assignment = ASSIGNMENT.exec(word.text);
      if (assignment) scope.vars.set(assignment[1]!, { text: assignment[2]!, substitutions: word.substitutions });
    });
  } else if (name === 'cd' || name === 'pushd') {
    const target = args.find((arg) => !arg.startsWith('-') || arg === '-') ?? '~';
    scope.cwd = target === '-' ? undefined : joinPath(scope.cwd, target);
  }
}

/** An absolute path (or one under `~`) for `target` seen from `cwd`, or undefined when the text cannot tell. */
export function joinPath(cwd: string | undefined, target: string): string | undefined {
  if (target.startsWith('~')) {
    const slash = target.indexOf('/');
    return normalizeHome(`~${slash < 0 ? '' : target.slice(slash)}`);
  }
  if (target.startsWith('/')) return normalizeHome(target);
  if (cwd === undefined) return undefined;
  return normalizeHome(`${cwd}/${target}`);
}

const HOME_ROOT = '/\u0003home';

function normalizeHome(target: string): string {
  const absolute = target.startsWith('~') ? `${HOME_ROOT}${target.slice(1)}` : target;
  const normal = path.posix.normalize(absolute).replace(/(?<=.)\/+$/, '');
  return normal === HOME_ROOT || normal.startsWith(`${HOME_ROOT}/`) ? `~${normal.slice(HOME_ROOT.length)}` : normal;
}

/** Replaces the lexer's and shell-quote's markers in a word: variables by their known value, substitutions by nothing. */
function resolveWord(raw: string, scope: Scope, substitutions: string[], depth: number): Word {
  const word: Word = { text: '', substitutions: [] };
  const pattern = new RegExp(`${VAR}([^${VAR}]*)${VAR}|${SUBSTITUTION}(\\d+)${SUBSTITUTION}`, 'g');
  let last = 0;
  for (const match of raw.matchAll(pattern)) {
    word.text += raw.slice(last, match.index);
    last = match.index + match[0].length;
    if (match[2] !== undefined) {
      // A subshell: its assignments and `cd` do not leak out.
      word.substitutions.push(parseScript(substitutions[Number(match[2])]!, scope.vars, depth + 1));
      continue;
    }
    const value = lookup(match[1]!, scope);
    word.text += value.text;
    word.substitutions.push(...value.substitutions);
  }
  word.text += raw.slice(last);
  return word;
}

function lookup(key: string, scope: Scope): Word {
  if (key === '') return { text: '$', substitutions: [] };
  // ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME:+alternative}, and the pattern forms.
  const expansion = /^#?([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=?+])([\s\S]*)|[#%/:^,][\s\S]*)?$/.exec(key);
  if (!expansion) return { text: '', substitutions: [] };
  const [, name, operator, operand] = expansion;
  const value = scope.vars.get(name!) ?? (name === 'HOME' ? { text: '~', substitutions: [] } : undefined);
  const given = { text: operand ?? '', substitutions: [] };
  if (operator?.endsWith('+')) return value ? given : { text: '', substitutions: [] };
  if (operator && (!value || (operator.startsWith(':') && value.text === ''))) return given;
  return value ?? { text: '', substitutions: [] };
}
