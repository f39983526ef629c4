import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';
import { connectDatabase, migrateDatabase, type Database } from '../../src/db/client.ts';
import { urlOfDatabase } from './database-url.ts';

export interface TestDatabase {
  url: string;
  database: Database;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file, on the run's Postgres. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = inject('adminDatabaseUrl');
  const name = `parlor_test_${randomBytes(5).toString('hex')}`;
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  await sql.unsafe(`create database ${name}`);
  await sql.end();
  const url = urlOfDatabase(admin, name);
  const database = await connectDatabase(url);
  await migrateDatabase(database);
  return {
    url,
    database,
    async drop() {
      await database.close();
      const sql = postgres(admin, { max: 1, onnotice: () => {} });
      await sql.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await sql.end();
    },
  };
}
