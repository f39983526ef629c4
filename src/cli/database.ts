import type { Settings } from '#src/config/env.ts';
import { connectDatabase, migrateDatabase, type Database } from '#src/db/client.ts';
import { startEmbeddedPostgres } from '#src/db/embedded-postgres.ts';

/**
 * The database a command works on: DATABASE_URL, or the embedded Postgres under PARLOR_HOME (shared with a running
 * Parlor, started and stopped again when none runs). Migrated, so a command on a fresh home finds its tables.
 */
export async function openDatabase(settings: Settings, log: (message: string) => void = () => {}): Promise<{ database: Database; close(): Promise<void> }> {
  const embedded = settings.databaseUrl ? undefined : await startEmbeddedPostgres(settings.home, log);
  try {
    const database = await connectDatabase(settings.databaseUrl ?? embedded!.localUrl, { max: 2 });
    await migrateDatabase(database);
    return {
      database,
      async close() {
        await database.close();
        await embedded?.release();
      },
    };
  } catch (err) {
    await embedded?.release();
    throw err;
  }
}
