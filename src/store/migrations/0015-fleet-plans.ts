/** Migration 0015_fleet_plans: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A host account is on its owner's plan and stores under its owner's quota (docs/operations.md#fleets): host
  // accounts made before kept the plan they were made on and could hold a quota of their own; both go.
  await sql`
    update accounts set
      plan = (select o.plan from accounts o where o.id = accounts.owner_account_id),
      quota_override = 0,
      quota_bytes = null
    where owner_account_id is not null`.execute(db);
}
