import type { Logger } from 'pino';
import type { Settings } from '#src/config/env.ts';
import { openDatabase } from './database.ts';

/** `parlor migrate`: applies pending migrations to DATABASE_URL (or the embedded Postgres) and exits. */
export async function runMigrate(settings: Settings, log: Logger): Promise<number> {
  const { close } = await openDatabase(settings, (m) => log.info(m));
  await close();
  process.stdout.write('migrations applied\n');
  return 0;
}
