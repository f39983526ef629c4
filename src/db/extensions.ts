import { sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';

export interface ExtensionState {
  /** The server ships it (pg_available_extensions). */
  available: boolean;
  /** Created in this database. */
  installed: boolean;
}

/** Whether the server has these extensions, and whether this database has them created. */
export async function extensionStates<N extends string>(db: Queryable, names: readonly N[]): Promise<Record<N, ExtensionState>> {
  const rows = (await db.execute(
    sql`select name, installed_version is not null as installed from pg_available_extensions where name in ${sql`(${sql.join(
      names.map((n) => sql`${n}`),
      sql`, `,
    )})`}`,
  )) as unknown as { name: N; installed: boolean }[];
  const states = {} as Record<N, ExtensionState>;
  for (const name of names) {
    const row = rows.find((r) => r.name === name);
    states[name] = { available: row !== undefined, installed: row?.installed ?? false };
  }
  return states;
}
