import fs from 'node:fs';
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';

const FILE = 'schedules.jsonc';
/** Editors write a file in several steps (truncate, write, rename): one reaction once they are done. */
const SETTLE_MS = 300;

/**
 * Watches each persona's folder for changes to `schedules.jsonc` (edits, replacements, creation, removal) and calls
 * `changed` a moment after the last one, so a hand edit takes effect within a second. The minute's housekeeping
 * still matches everything again, for file systems where watching does not work.
 */
export function watchScheduleFiles(personas: readonly Persona[], changed: (persona: Persona) => void, log: Logger): { stop(): void } {
  const watchers: fs.FSWatcher[] = [];
  const timers = new Map<string, NodeJS.Timeout>();
  for (const persona of personas) {
    try {
      // The folder, not the file: an editor that saves by renaming replaces the file a file watch would follow.
      const watcher = fs.watch(persona.dir, { persistent: false }, (_event, name) => {
        if (name !== null && String(name) !== FILE) return;
        clearTimeout(timers.get(persona.name));
        timers.set(
          persona.name,
          setTimeout(() => {
            timers.delete(persona.name);
            changed(persona);
          }, SETTLE_MS),
        );
      });
      watcher.on('error', (err) => log.warn({ err, persona: persona.name }, 'cannot watch schedules.jsonc; hand edits apply within a minute'));
      watchers.push(watcher);
    } catch (err) {
      log.warn({ err, persona: persona.name }, 'cannot watch schedules.jsonc; hand edits apply within a minute');
    }
  }
  return {
    stop() {
      for (const watcher of watchers) watcher.close();
      for (const timer of timers.values()) clearTimeout(timer);
    },
  };
}
