/**
 * deploy/prometheus/alerts.yml and deploy/grafana/coffer.json against the real thing: promtool checks and unit-tests
 * the rules, then Debian's Prometheus scrapes a real `coffer serve` (PostgreSQL, with the metrics token) and every
 * panel query and alert expression is evaluated through its HTTP API.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyService } from '../../src/services/keys.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { api, envelope } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { lacking, PROMETHEUS, PROMTOOL } from '../helpers/required.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';

const DEPLOY = path.resolve(import.meta.dirname, '../../deploy');
const RULES = path.join(DEPLOY, 'prometheus/alerts.yml');
const TOKEN = 'metrics-token-for-the-test-0123456789';
const haveProm = fs.existsSync(PROMTOOL) && fs.existsSync(PROMETHEUS);

describe.skipIf(lacking(haveProm, 'prometheus'))('alert rules (promtool)', () => {
  it('check rules and the rules unit tests pass', () => {
    expect(execFileSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8' })).toMatch(/SUCCESS: \d+ rules found/);
    const out = execFileSync(PROMTOOL, ['test', 'rules', 'alerts.test.yml'], { cwd: path.dirname(RULES), encoding: 'utf8' });
    expect(out).toMatch(/SUCCESS/);
  });
});

function alertExpressions(): { alert: string; expr: string }[] {
  const text = fs.readFileSync(RULES, 'utf8');
  const out = execFileSync(PROMTOOL, ['check', 'rules', '--lint=none', RULES], { encoding: 'utf8' });
  expect(out).toMatch(/SUCCESS/);
  // The rules as JSON, by asking Prometheus itself later; here, a plain reading of the YAML's alert/expr pairs.
  const rules: { alert: string; expr: string }[] = [];
  const blocks = text.split(/\n\s+- alert: /).slice(1);
  for (const block of blocks) {
    const alert = block.split('\n')[0]!.trim();
    const match = /\n\s+expr: (\|\n((?:\s{10,}.*\n)+)|.*)/.exec(block)!;
    rules.push({ alert, expr: (match[2] ?? match[1]!).trim() });
  }
  return rules;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

describe.skipIf(lacking(haveProm, 'prometheus') || skipPg)('Prometheus scraping a real coffer serve', () => {
  let schema: TestSchema;
  let node: ServeNode;
  let prometheus: ChildProcess | undefined;
  let promUrl: string;

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_prom');
    const store = openPostgresStores(schema.url);
    await store.database.migrate();
    const keys = new KeyService(store, { now: () => Date.now() });
    const { apiKey } = await keys.issueKey(await keys.createAccount('pro'));
    await store.database.close();
    node = await startServeNode('prom', { COFFER_DATABASE_URL: schema.url, COFFER_METRICS_TOKEN: TOKEN, COFFER_QUOTA_PRO: '100' });

    // Traffic: a vault, a slot, an upload past the quota (413), a create refused… and a few reads.
    const call = api(node.url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const slot = await call('POST', '/api/backups');
    expect(slot.status).toBe(201);
    const over = await call('POST', `/api/backups/upload?backupId=${slot.body.backupId}`, {
      body: new Uint8Array(500),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(over.status).toBe(413);
    for (let i = 0; i < 5; i++) await call('GET', '/api/backups');

    const dir = tempDir('coffer-prometheus-');
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    const target = new URL(node.url).host;
    fs.writeFileSync(
      path.join(dir, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        `rule_files: [${JSON.stringify(RULES)}]`,
        'scrape_configs:',
        '  - job_name: coffer',
        '    authorization: { credentials_file: ' + JSON.stringify(path.join(dir, 'token')) + ' }',
        `    static_configs: [{ targets: [${JSON.stringify(target)}] }]`,
        '',
      ].join('\n'),
    );
    fs.writeFileSync(path.join(dir, 'token'), TOKEN, { mode: 0o600 });
    prometheus = spawn(
      PROMETHEUS,
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: 'ignore' },
    );
    // Wait for three good scrapes (rate() needs two samples).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const samples = await query('count_over_time(up{job="coffer"}[1m])').catch(() => []);
      if (samples.length > 0 && Number(samples[0].value[1]) >= 3) break;
      if (Date.now() > deadline) throw new Error('Prometheus did not scrape Coffer');
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(Number((await query('up{job="coffer"}'))[0].value[1])).toBe(1);
  }, 60_000);

  afterAll(async () => {
    if (prometheus) {
      prometheus.kill('SIGTERM');
      await exited(prometheus);
    }
    if (node) {
      node.child.kill('SIGTERM');
      await exited(node.child);
    }
    await schema?.drop();
  });

  async function query(expr: string): Promise<any[]> {
    const response = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await response.json()) as { status: string; error?: string; data?: { result: any[] } };
    if (body.status !== 'success') throw new Error(`${expr}: ${body.error}`);
    return body.data!.result;
  }

  it('every dashboard panel query parses and returns series', async () => {
    const dashboard = JSON.parse(fs.readFileSync(path.join(DEPLOY, 'grafana/coffer.json'), 'utf8'));
    const targets = dashboard.panels.flatMap((panel: any) => panel.targets.map((t: any) => ({ title: panel.title, expr: t.expr })));
    expect(targets.length).toBeGreaterThan(10);
    for (const { title, expr } of targets) {
      expect((await query(expr)).length, `${title}: ${expr}`).toBeGreaterThan(0);
    }
  });

  it('every alert expression parses, and every metric it reads is exported', async () => {
    const rules = alertExpressions();
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining(['CofferQuotaRefusals', 'CofferRestoreDrillsStale', 'CofferRestoreDrillFailed']),
    );
    for (const { alert, expr } of rules) {
      await query(expr); // throws on a parse error
      const metrics = new Set([...expr.matchAll(/\b(coffer_[a-z_]+|up)\b/g)].map((m) => m[1]!));
      expect(metrics.size, alert).toBeGreaterThan(0);
      for (const metric of metrics) expect((await query(metric)).length, `${alert}: ${metric}`).toBeGreaterThan(0);
    }
    // The aggregate gauges and the refusal are there, without per-account labels.
    expect(await query('coffer_quota_refusals_total{where="upload"} == 1')).toHaveLength(1);
    expect(await query('coffer_accounts{plan="pro"} == 1')).toHaveLength(1);
    expect(await query('coffer_change_feed_connected == 1')).toHaveLength(1);
    // Nobody has drilled or locked anything here: the drill and lock gauges are there, at zero, per plan.
    expect(
      await query('sum(coffer_drill_accounts) == 0 and sum(coffer_drill_stale_accounts) == 0 and sum(coffer_locked_backups) == 0'),
    ).toHaveLength(1);
    for (const sample of await query('{__name__=~"coffer_accounts.*|coffer_stored_bytes|coffer_drill_.*|coffer_locked_.*"}')) {
      expect(Object.keys(sample.metric).sort()).toEqual(['__name__', 'instance', 'job', 'plan']);
    }
  });
});
