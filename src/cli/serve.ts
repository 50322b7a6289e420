/** `coffer serve`: the API server (`npm start`). */
import type { Command } from 'commander';
import { loadConfig, SERVER_SETTINGS } from '../config.js';
import { settingsHelp } from './settings-help.js';

const SHUTDOWN_GRACE_MS = 30_000;

export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description('run the Coffer server (configured by environment variables)')
    .addHelpText('after', settingsHelp('Settings, as environment variables', SERVER_SETTINGS))
    .action(async () => {
      const config = loadConfig();
      const { startServer } = await import('../server/compose.js');
      const server = await startServer(config, {
        logger: config.logLevel === 'silent' ? false : { level: config.logLevel },
      });
      // Handlers before any notice: whoever reads "listening on" may signal at once.
      let stopping = false;
      const shutdown = (signal: string) => {
        if (stopping) return;
        stopping = true;
        process.stderr.write(`${signal}: finishing in-flight requests and closing event streams…\n`);
        const force = setTimeout(() => {
          process.stderr.write('shutdown took too long; exiting (unfinished uploads leave no blob)\n');
          process.exit(1);
        }, SHUTDOWN_GRACE_MS);
        force.unref();
        server.stop().then(
          () => process.exit(0),
          (error: unknown) => {
            process.stderr.write(`shutdown failed: ${(error as Error).message}\n`);
            process.exit(1);
          },
        );
      };
      process.on('SIGINT', () => shutdown('SIGINT'));
      process.on('SIGTERM', () => shutdown('SIGTERM'));
      const first = await server.parts.keys.bootstrapFirstAccount(config.initialApiKey);
      // Plain-text notices go to stderr: stdout carries only the JSON log lines, and a log shipper reading them
      // must never see the first API key.
      if (first) {
        const shown = config.initialApiKey ? '(the key from COFFER_INITIAL_API_KEY or COFFER_INITIAL_API_KEY_FILE)' : first.apiKey;
        process.stderr.write(
          [
            '',
            'First start: created account ' + first.account.id + ' (free plan) and an API key with all scopes.',
            `API key (shown once, store it now): ${shown}`,
            `  export COFFER_URL=${config.publicUrl}`,
            `Web console: ${config.publicUrl}/console (sign in with that key, or: coffer admin login-link ${first.account.id})`,
            '',
          ].join('\n') + '\n',
        );
      }
      process.stderr.write(`Coffer listening on ${server.url} (public URL ${config.publicUrl})\n`);

    });
}
