/** Starts a real Coffer server on a real loopback port with its own data directory (and optionally a test clock). */
import type { FastifyServerOptions } from 'fastify';
import { type Config, loadConfig } from '../../src/config.js';
import type { Clock } from '../../src/domain/clock.js';
import type { Plan } from '../../src/domain/plans.js';
import type { Scope } from '../../src/domain/scopes.js';
import { type Server, startOnFreePort } from '../../src/server/compose.js';
import { tempDir } from './tmp.js';

export interface TestServer extends Server {
  dataDir: string;
  /** Issues a key on a new account (or the given one). */
  newKey(options?: { plan?: Plan; scopes?: Scope[]; accountId?: string; expiresInMs?: number }): Promise<{
    apiKey: string;
    accountId: string;
    keyId: string;
  }>;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  /** Settings that have no environment variable (limits, sweep interval). */
  config?: Partial<Config>;
  clock?: Clock;
  dataDir?: string;
  logger?: FastifyServerOptions['logger'];
}

/** Stop it (server.stop()) in the file's afterAll; its data directory (a tempDir) goes after that. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? tempDir();
  const server = await startOnFreePort(
    (port, url): Config => ({
      ...loadConfig({ PORT: String(port), HOST: '127.0.0.1', COFFER_PUBLIC_URL: url, COFFER_DATA_DIR: dataDir, ...options.env }),
      ...options.config,
    }),
    { clock: options.clock, logger: options.logger },
  );
  return {
    ...server,
    dataDir,
    async newKey({ plan = 'free', scopes, accountId, expiresInMs } = {}) {
      const keys = server.parts.keys;
      const account = accountId ? (await server.parts.stores.accounts.getAccount(accountId))! : await keys.createAccount(plan);
      const issued = await keys.issueKey(account, { scopes, expiresInMs });
      return { apiKey: issued.apiKey, accountId: account.id, keyId: issued.key.id };
    },
  };
}
