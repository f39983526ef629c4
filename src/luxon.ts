// luxon, the copy cron-parser loads (its CommonJS build; cron-parser checks every schedule, and pg-boss uses it too).
// luxon's package has an ES module build as well, and `import ... from 'luxon'` would load that as a second copy:
// another half a megabyte of source and its compiled code kept in every process's memory.
import { createRequire } from 'node:module';
import type * as Luxon from 'luxon';

const require = createRequire(import.meta.url);

export const { DateTime } = require('luxon') as typeof Luxon;
