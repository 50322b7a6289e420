/** Settings shared by every node (first writer or last writer wins). */
export interface SettingStore {
  /** The stored value of a shared setting; stores `initial` first when there is none (first writer wins). */
  ensureSetting(name: string, initial: string, now: number): Promise<string>;
  /** Sets a shared setting, replacing any value it had (the last writer wins). */
  putSetting(name: string, value: string, now: number): Promise<void>;
  /** The stored value of a shared setting; undefined when none was stored. */
  getSetting(name: string): Promise<string | undefined>;
}
