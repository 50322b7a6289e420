/**
 * The compose files (deploy/compose.yaml, deploy/compose.scale-out.yaml, docs/deploy.md#in-a-container) as far as this
 * machine can check them without a registry (the scale-out file pulls PostgreSQL and Garage): docs/deploy.md shows
 * them verbatim; every Coffer setting they give is one `coffer serve` knows, and `loadConfig` accepts the
 * environment of each service as written, with its secret files, giving the store the file means. The image itself
 * is built and run in test/deploy/container.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig, SERVER_SETTINGS } from '../../src/config.js';
import { tempDir } from '../helpers/tmp.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const SETTING = /^\s+((?:COFFER_|LOG_LEVEL|PORT|HOST)[A-Z0-9_]*): (.*)$/;

/** The Coffer settings of a compose file's service environments, `${VAR:?…}` interpolations as VAR's value. */
function cofferEnvironment(compose: string, variables: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of compose.split('\n')) {
    const match = SETTING.exec(line);
    if (!match) continue;
    env[match[1]!] = match[2]!.replace(/\$\{([A-Z0-9_]+)(?::\?[^}]*)?\}/g, (_, name: string) => {
      const value = variables[name];
      if (value === undefined) throw new Error(`${name} is not given to the check`);
      return value;
    });
  }
  return env;
}

/** The environment with each /run/secrets/<name> path pointing at a file holding `secrets[name]`. */
function withSecretFiles(env: Record<string, string>, secrets: Record<string, string>): Record<string, string> {
  const dir = tempDir('coffer-compose-secrets-');
  return Object.fromEntries(
    Object.entries(env).map(([key, value]) => {
      const name = /^\/run\/secrets\/(.+)$/.exec(value)?.[1];
      if (name === undefined) return [key, value];
      if (secrets[name] === undefined) throw new Error(`no value for the secret ${name}`);
      const file = path.join(dir, name);
      fs.writeFileSync(file, `${secrets[name]}\n`);
      return [key, file];
    }),
  );
}

describe('the compose files', () => {
  it('are shown in docs/deploy.md verbatim, with the Garage configuration', () => {
    const doc = read('docs/deploy.md');
    for (const file of ['deploy/compose.yaml', 'deploy/compose.scale-out.yaml']) expect(doc).toContain('```yaml\n' + read(file) + '```\n');
    expect(doc).toContain('```toml\n' + read('deploy/garage.toml') + '```\n');
  });

  it('give only settings coffer serve knows', () => {
    for (const file of ['deploy/compose.yaml', 'deploy/compose.scale-out.yaml']) {
      const names = Object.keys(cofferEnvironment(read(file), { S3_ACCESS_KEY_ID: 'x', S3_SECRET_ACCESS_KEY: 'x' }));
      expect(names.length, file).toBeGreaterThan(1);
      expect(
        names.filter((name) => !(name in SERVER_SETTINGS)),
        file,
      ).toEqual([]);
    }
  });

  it('one service: the embedded default (SQLite and files), at the public URL', () => {
    const config = loadConfig(cofferEnvironment(read('deploy/compose.yaml'), {}));
    expect(config).toMatchObject({ databaseUrl: null, blobStore: 'fs', publicUrl: 'https://backup.example.com' });
  });

  it('scale-out: PostgreSQL from the secret file, the S3 store with the key from .env, the metrics token from its file', () => {
    const compose = read('deploy/compose.scale-out.yaml');
    const env = cofferEnvironment(compose, { S3_ACCESS_KEY_ID: 'GK0123456789abcdef01234567', S3_SECRET_ACCESS_KEY: 'f'.repeat(64) });
    const secrets = { database_url: 'postgres://coffer:pw@postgres:5432/coffer', metrics_token: 'a'.repeat(64) };
    const config = loadConfig(withSecretFiles(env, secrets));
    expect(config).toMatchObject({
      databaseUrl: secrets.database_url,
      blobStore: 's3',
      metricsToken: 'a'.repeat(64),
      s3: { endpoint: 'http://garage:3900', region: 'garage', bucket: 'coffer', secretAccessKey: 'f'.repeat(64) },
    });
    // Every secret a service names is declared with its file, and the region is Garage's.
    for (const name of ['database_url', 'metrics_token', 'postgres_password', 'garage_rpc_secret']) {
      expect(compose).toMatch(new RegExp(`^  ${name}: \\{ file: \\./secrets/[a-z-]+ \\}$`, 'm'));
    }
    expect(read('deploy/garage.toml')).toContain('s3_region = "garage"');
  });
});
