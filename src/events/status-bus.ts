/** Fan-out of backup status changes to open event streams: one source, many listeners. */
import type { Backup } from '../domain/entities.js';

export type StatusListener = (backup: Backup) => void;

export interface StatusBus {
  /** Announces the new state of a backup to every subscriber, on this node and (for shared buses) others. */
  publish(backup: Backup): Promise<void>;
  /** Listens for changes of one backup; returns the unsubscribe function. */
  subscribe(backupId: string, listener: StatusListener): () => void;
  /** Called when the bus can no longer deliver changes (open streams must then end with an error frame). */
  onFailure(listener: (error: Error) => void): void;
  close(): Promise<void>;
}

/** In-process bus: enough for one node; the PostgreSQL bus reuses it for local delivery. */
export class LocalStatusBus implements StatusBus {
  private readonly listeners = new Map<string, Set<StatusListener>>();
  private readonly failureListeners: ((error: Error) => void)[] = [];

  async publish(backup: Backup): Promise<void> {
    this.deliver(backup);
  }

  deliver(backup: Backup): void {
    for (const listener of this.listeners.get(backup.id) ?? []) listener(backup);
  }

  subscribe(backupId: string, listener: StatusListener): () => void {
    let set = this.listeners.get(backupId);
    if (!set) this.listeners.set(backupId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(backupId);
    };
  }

  onFailure(listener: (error: Error) => void): void {
    this.failureListeners.push(listener);
  }

  /** Reports that changes can no longer be delivered (used by buses that depend on a connection). */
  fail(error: Error): void {
    for (const listener of this.failureListeners) listener(error);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
