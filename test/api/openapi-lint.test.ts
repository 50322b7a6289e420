/**
 * /openapi.json passes two OpenAPI linters with the repository's own configs: Redocly CLI (recommended rules,
 * redocly.yaml) and Spectral (spectral:oas, .spectral.yaml), each run through its real CLI on the document the
 * server serves. Their one exception (PATCH /api/backup-account declares no 2xx) must stay that narrow.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useServer } from '../helpers/fixture.js';
import { tempDir } from '../helpers/tmp.js';

const run = promisify(execFile);
const REDOCLY = path.resolve('node_modules/@redocly/cli/bin/cli.js');
const SPECTRAL = path.resolve('node_modules/@stoplight/spectral-cli/dist/index.js');
// No telemetry, update check or analytics: the linters must work where only the npm registry is reachable.
const ENV = {
  ...process.env,
  REDOCLY_TELEMETRY: 'off',
  REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
  SCARF_ANALYTICS: 'false',
  NO_COLOR: '1',
};
const LINT_TIMEOUT = 60_000;

interface Problem {
  rule: string;
  where: string;
}

/** Redocly's JSON report: {totals, problems: [{ruleId, location: [{pointer}]}]}. */
async function redocly(file: string): Promise<Problem[]> {
  const { stdout } = await run(
    process.execPath,
    [REDOCLY, 'lint', path.basename(file), `--config=${path.resolve('redocly.yaml')}`, '--format=json'],
    { cwd: path.dirname(file), env: ENV, maxBuffer: 16 * 1024 * 1024 },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
  const report = JSON.parse(stdout) as { problems: { ruleId: string; location: { pointer: string }[] }[] };
  return report.problems.map((p) => ({ rule: p.ruleId, where: p.location[0]?.pointer ?? '' }));
}

/** Spectral's JSON report: [{code, path: [...]}], written to a file (stdout also carries a summary line). */
async function spectral(file: string): Promise<Problem[]> {
  const output = `${file}.spectral.json`;
  await run(
    process.execPath,
    [SPECTRAL, 'lint', file, `--ruleset=${path.resolve('.spectral.yaml')}`, '--format=json', `--output=${output}`, '--fail-severity=hint'],
    { cwd: path.dirname(file), env: ENV, maxBuffer: 16 * 1024 * 1024 },
  ).catch((error: { code?: unknown }) => {
    if (!fs.existsSync(output)) throw error;
  });
  const report = JSON.parse(fs.readFileSync(output, 'utf8')) as { code: string; path: string[] }[];
  return report.map((p) => ({ rule: p.code, where: p.path.join('.') }));
}

const fx = useServer();
let dir: string;
let document: any;

beforeAll(async () => {
  dir = tempDir();
  document = await (await fetch(`${fx.server.url}/openapi.json`)).json();
});

function write(name: string, doc: unknown): string {
  const file = path.join(dir, name, 'openapi.json');
  fs.mkdirSync(path.dirname(file));
  fs.writeFileSync(file, JSON.stringify(doc));
  return file;
}

describe('/openapi.json under the OpenAPI linters', () => {
  it('Redocly (recommended) reports no problem', { timeout: LINT_TIMEOUT }, async () => {
    expect(await redocly(write('redocly', document))).toEqual([]);
  });

  it('Spectral (spectral:oas) reports no problem', { timeout: LINT_TIMEOUT }, async () => {
    expect(await spectral(write('spectral', document))).toEqual([]);
  });

  it(
    'both still catch an operation without a 2xx, an undocumented operation and an undeclared tag',
    { timeout: LINT_TIMEOUT },
    async () => {
      const broken = structuredClone(document);
      const get = broken.paths['/api/backups'].get;
      delete get.responses['200'];
      delete get.description;
      get.tags = ['Undeclared'];
      const file = write('broken', broken);

      expect(await redocly(file)).toEqual(
        expect.arrayContaining([{ rule: 'rule/operation-2xx-response', where: '#/paths/~1api~1backups/get/responses' }]),
      );
      const found = await spectral(file);
      expect(found).toEqual(
        expect.arrayContaining([
          { rule: 'operation-success-response', where: 'paths./api/backups.get.responses' },
          { rule: 'operation-description', where: 'paths./api/backups.get' },
          { rule: 'operation-tag-defined', where: 'paths./api/backups.get.tags.0' },
        ]),
      );
      // The exception covers the reserved PATCH only: no other finding mentions it.
      expect(found.filter((p) => p.where.includes('backup-account'))).toEqual([]);
    },
  );
});
