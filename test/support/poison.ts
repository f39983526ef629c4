import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/client.ts';

/** Makes storing any message whose text holds "poison pill" fail, as an update the database refuses would. */
export async function poisonMessages(db: Database['db']): Promise<void> {
  await db.execute(
    sql.raw(`
      create or replace function poison() returns trigger language plpgsql as $$
      begin
        if new.content->>'content' like '%poison pill%' then raise exception 'poisoned message'; end if;
        return new;
      end $$;
      create trigger poison before insert on messages for each row execute function poison();`),
  );
}

export async function curePoison(db: Database['db']): Promise<void> {
  await db.execute(sql`drop trigger if exists poison on messages`);
}
