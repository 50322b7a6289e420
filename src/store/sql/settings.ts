/** SettingStore on SQL: settings shared by every node. */
import type { SettingStore } from '../ports/settings.js';
import type { SqlContext } from './context.js';

export class SqlSettingStore implements SettingStore {
  constructor(private readonly ctx: SqlContext) {}

  async ensureSetting(name: string, initial: string, now: number): Promise<string> {
    await this.ctx.db
      .insertInto('settings')
      .values({ name, value: initial, created_at: now })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const row = await this.ctx.db.selectFrom('settings').select('value').where('name', '=', name).executeTakeFirstOrThrow();
    return row.value;
  }

  async putSetting(name: string, value: string, now: number): Promise<void> {
    await this.ctx.db
      .insertInto('settings')
      .values({ name, value, created_at: now })
      .onConflict((oc) => oc.column('name').doUpdateSet({ value, created_at: now }))
      .execute();
  }

  async getSetting(name: string): Promise<string | undefined> {
    const row = await this.ctx.db.selectFrom('settings').select('value').where('name', '=', name).executeTakeFirst();
    return row?.value;
  }
}
