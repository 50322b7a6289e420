/**
 * `coffer admin …`: operator commands that talk to the configured database directly (README.md#operator-commands),
 * one module per group, on the services the composition root builds for them (./frame.ts withServices).
 */
import type { Command } from 'commander';
import { registerAccountCommands } from './accounts.js';
import { registerAuditCommand } from './audit.js';
import { registerBackupCommands } from './backups.js';
import { registerKeyCommands } from './keys.js';
import { registerLoginLinkCommand } from './login-link.js';
import { registerSnapshotCommand } from './snapshot.js';
import { registerUsageCommand } from './usage.js';

export function registerAdminCommands(program: Command): void {
  const admin = program.command('admin').description('operator commands (use the server database directly)');
  // In the order `coffer admin --help` lists them.
  registerAccountCommands(admin);
  registerUsageCommand(admin);
  registerSnapshotCommand(admin);
  registerLoginLinkCommand(admin);
  registerBackupCommands(admin);
  registerKeyCommands(admin);
  registerAuditCommand(admin);
}
