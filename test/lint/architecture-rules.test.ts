/**
 * The architecture rules of eslint.config.js hold: each is run on a small file placed where it would live, and must
 * refuse what it names (and let the real files through). ESLint's own API with the repository's configuration.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: root });

async function ruleIds(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.map((message) => message.ruleId ?? message.message);
}

const IMPORTS = '@typescript-eslint/no-restricted-imports';

describe('eslint architecture rules', () => {
  it('services reach persistence through the ports they name in SERVICE_PORTS', async () => {
    const real = readFileSync(path.join(root, 'src/services/quotas.ts'), 'utf8');
    expect(await ruleIds('src/services/quotas.ts', real)).toEqual([]);
    expect(
      await ruleIds('src/services/quotas.ts', `import { sqlStores } from '../store/sql/index.js';\nexport const s = sqlStores;\n`),
    ).toContain(IMPORTS);
    expect(
      await ruleIds('src/services/quotas.ts', `import type { KeyStore } from '../store/ports/keys.js';\nexport type K = KeyStore;\n`),
    ).toContain('coffer/service-ports');
    const pick = `import type { Stores } from '../store/ports/stores.js';\nexport type P = Pick<Stores, 'accounts' | 'keys'>;\n`;
    expect(await ruleIds('src/services/quotas.ts', pick)).toEqual(['coffer/service-ports']);
    const whole = `import type { Stores } from '../store/ports/stores.js';\nexport type P = Stores;\n`;
    expect(await ruleIds('src/services/quotas.ts', whole)).toEqual(['coffer/service-ports']);
    expect(await ruleIds('src/services/unlisted-service.ts', 'export const x = 1;\n')).toEqual(['coffer/service-ports']);
    expect(await ruleIds('src/services/quotas.ts', `import { Uuid } from '../contract/schemas.js';\nexport const u = Uuid;\n`)).toContain(
      IMPORTS,
    );
  });

  it('only src/config.ts reads the environment', async () => {
    const code = 'export const home = process.env.HOME;\n';
    expect(await ruleIds('src/server/somewhere.ts', code)).toEqual(['no-restricted-properties']);
    expect(await ruleIds('src/client/somewhere.ts', code)).toEqual(['no-restricted-properties']);
    expect(await ruleIds('src/config.ts', code)).toEqual([]);
  });

  it('the layers import downwards only, the configuration included', async () => {
    expect(
      await ruleIds('src/domain/somewhere.ts', `import type { Stores } from '../store/ports/stores.js';\nexport type S = Stores;\n`),
    ).toEqual([IMPORTS]);
    expect(await ruleIds('src/store/somewhere.ts', `import { loadConfig } from '../config.js';\nexport const l = loadConfig;\n`)).toEqual(
      [],
    );
    for (const module of ['config.js', 'config-settings.js', 'config-readers.js']) {
      expect(await ruleIds('src/domain/somewhere.ts', `import * as c from '../${module}';\nexport const x = c;\n`)).toEqual([IMPORTS]);
      expect(await ruleIds('src/client/somewhere.ts', `import * as c from '../${module}';\nexport const x = c;\n`)).toEqual([IMPORTS]);
    }
  });
});
