import { sql } from 'drizzle-orm';
import { clientOf, rowReader, type Queryable } from './client.ts';
import { userModels } from './schema.ts';

export type UserModelRow = typeof userModels.$inferSelect;
const readUserModel = rowReader(userModels);

/** Sets what the persona knows of one aspect (dimension) of a person; whether the aspect is new. */
export async function upsertUserModel(
  db: Queryable,
  row: { persona: string; userAddress: string; dimension: string; content: string; confidence: number },
): Promise<{ created: boolean }> {
  const [result] = await db
    .insert(userModels)
    .values(row)
    .onConflictDoUpdate({
      target: [userModels.persona, userModels.userAddress, userModels.dimension],
      set: { content: row.content, confidence: row.confidence, updatedAt: sql`now()` },
    })
    // xmax is 0 on a row this statement inserted, and the updating transaction's id on one it updated.
    .returning({ created: sql<boolean>`(xmax = 0)` });
  return result;
}

/** The most aspects of a person a turn reads. */
export const USER_MODEL_LIMIT = 50;

/** The persona's model of one person, the most confident and newest first, at most `limit` aspects. */
export async function userModelOf(db: Queryable, persona: string, userAddress: string, limit = USER_MODEL_LIMIT): Promise<UserModelRow[]> {
  // Every turn with a person reads it: written for postgres.js directly (see clientOf).
  const rows = await clientOf(db)<Record<string, unknown>[]>`
    select * from user_models where persona = ${persona} and user_address = ${userAddress}
    order by confidence desc, updated_at desc, dimension limit ${limit}`;
  return rows.map(readUserModel);
}
