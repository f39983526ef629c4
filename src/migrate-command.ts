import type { Logger } from 'pino';
import type { Settings } from '#src/config/env.ts';
import { connectDatabase, migrateDatabase } from '#src/db/client.ts';
import { startEmbeddedPostgres } from '#src/db/embedded-postgres.ts';

/** `parlor migrate`: applies pending migrations to DATABASE_URL (or the embedded Postgres) and exits. */
export async function runMigrate(settings: Settings, log: Logger): Promise<number> {
  const embedded = settings.databaseUrl ? undefined : await startEmbeddedPostgres(settings.home, (m) => log.info(m));
  try {
    const database = await connectDatabase(settings.databaseUrl ?? embedded!.url, { max: 2 });
    try {
      await migrateDatabase(database);
      process.stdout.write('migrations applied\n');
    } finally {
      await database.close();
    }
  } finally {
    await embedded?.release();
  }
  return 0;
}
