/** `coffer serve`: the API server (`npm start`). */
import os from 'node:os';
import type { Command } from 'commander';
import { loadConfig, SERVER_SETTINGS } from '../config.js';
import { settingsHelp } from './settings-help.js';
import { operator } from './admin/frame.js';

const SHUTDOWN_GRACE_MS = 30_000;

type Interfaces = ReturnType<typeof os.networkInterfaces>;

/**
 * What the server really listens on, in words and URLs: with HOST 0.0.0.0 (the default) every IPv4 interface, with
 * `::` every interface (IPv6, and IPv4 where the system maps it), each address listed; with any other HOST that one.
 */
export function listenedOn(host: string, port: number, interfaces: Interfaces): { text: string; urls: string[] } {
  const urlOf = (address: string) => `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
  if (host !== '0.0.0.0' && host !== '::') {
    const url = urlOf(host);
    return { text: `listening on ${url} only (HOST=${host})`, urls: [url] };
  }
  const addresses = Object.values(interfaces)
    .flatMap((list) => list ?? [])
    .filter((entry) => (host === '::' || entry.family === 'IPv4') && !entry.address.startsWith('fe80:'))
    .sort((a, b) => Number(b.internal) - Number(a.internal))
    .map((entry) => entry.address);
  const urls = addresses.map(urlOf);
  return {
    text: `listening on all interfaces (HOST=${host}), port ${port}: ${urls.join(', ') || '(no interface has an address)'}`,
    urls,
  };
}

export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description('run the Coffer server (configured by environment variables)')
    .addHelpText('after', settingsHelp('Settings, as environment variables', SERVER_SETTINGS))
    .action(async () => {
      const config = loadConfig();
      const [{ startServer }, { restrictFileModes }] = await Promise.all([
        import('../server/compose.js'),
        import('../server/file-modes.js'),
      ]);
      restrictFileModes(config); // before anything is created (not in startServer: tests run servers in their own process)
      const { serverLogger } = await import('../server/log.js');
      const server = await startServer(config, { logger: serverLogger(config.logLevel) });
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
      const first = await server.parts.keys.bootstrapFirstAccount(config.initialApiKey, config.initialPlan, operator());
      const port = Number(new URL(server.url).port);
      const where = listenedOn(config.host, port, os.networkInterfaces());
      // Plain-text notices go to stderr: stdout carries only the JSON log lines, and a log shipper reading them
      // must never see the first API key. The first start's key comes first, where the server listens right under it.
      const lines: string[] = [];
      if (first) {
        const shown = config.initialApiKey ? '(the key from COFFER_INITIAL_API_KEY or COFFER_INITIAL_API_KEY_FILE)' : first.apiKey;
        lines.push(`API key (shown once, store it now): ${shown}`);
      }
      lines.push(`Coffer ${where.text}; public URL ${config.publicUrl}`);
      if (first) {
        lines.push(
          `First start: created account ${first.account.id} (${config.initialPlan} plan, COFFER_INITIAL_PLAN) and that key, with all scopes.`,
          `  export COFFER_URL=${config.publicUrl}`,
          `Web console: ${config.publicUrl}/console (sign in with that key, or: coffer admin login-link ${first.account.id})`,
        );
      }
      process.stderr.write(lines.join('\n') + '\n');
      // The one log line of the listener (Fastify's own "Server listening at" lines are left out, src/server/log.ts).
      server.app.log.info({ host: config.host, port, addresses: where.urls }, 'listening');
    });
}
