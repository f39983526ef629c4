import fs from 'node:fs';
import path from 'node:path';
import { applyEdits, modify, parse as parseJsonc, stripComments, type ParseError } from 'jsonc-parser';
import { ConfigError } from './errors.ts';
import { checkSchedules, type ScheduleEntry } from './persona.ts';

const FORMAT = { formattingOptions: { insertSpaces: true, tabSize: 2 } };

/**
 * Edits a persona's `schedules.jsonc` in place, keeping its comments: `change` gets the entries as the file holds
 * them now and returns the edit to make (it may throw a ConfigError, a missing name say). The result is checked
 * like the file is at start-up before it is written (atomically); a problem throws a ConfigError and leaves the file
 * as it was. Callers serialize edits of one persona (the scheduler holds a database lock per persona).
 */
export function editSchedules(
  dir: string,
  change: (entries: ScheduleEntry[]) => { index: number; value: ScheduleEntry | undefined } | { append: ScheduleEntry },
): ScheduleEntry[] {
  const file = path.join(dir, 'schedules.jsonc');
  let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  if (stripComments(text).trim() === '') text = `${text.trimEnd()}${text.trim() ? '\n' : ''}[]\n`;
  const errors: ParseError[] = [];
  const current = (parseJsonc(text, errors, { allowTrailingComma: true }) ?? []) as ScheduleEntry[];
  // Messages name the file as the persona knows it, not by its place on this machine.
  const label = 'schedules.jsonc';
  if (errors.length) throw new ConfigError(`${label} cannot be parsed; fix it by hand first`);
  checkSchedules(label, current);
  const edit = change(current);
  const edits = 'append' in edit ? modify(text, [current.length], edit.append, { ...FORMAT, isArrayInsertion: true }) : modify(text, [edit.index], edit.value, FORMAT);
  const next = applyEdits(text, edits);
  const entries = checkSchedules(label, parseJsonc(next, [], { allowTrailingComma: true }));
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, next);
  fs.renameSync(temporary, file);
  return entries;
}
