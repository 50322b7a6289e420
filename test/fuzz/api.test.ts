/**
 * Contract fuzzing: for every /api operation in the server's own /openapi.json, valid and mutated requests
 * (see arbitraries.ts) go to a real server on a real port over a raw socket. For each one:
 * - never a 5xx, and always a complete response;
 * - the status is declared for the operation (404/405 for unknown routes) and the body validates against
 *   the declared schema (test/helpers/conformance.ts); an event stream's first frame validates too;
 * - the order of checks holds: no/invalid/ambiguous credential → 401, missing scope → 403, an id that is not
 *   one of the caller's visible backups → 404 (never another account's data);
 * - a refused request (4xx) and any read changed nothing: accounts, vaults, keys, every backup record
 *   (tombstones included) and the stored blob, temp and multipart files are as before.
 * A request that succeeded in changing state gets a fresh world for the next case.
 *
 * Bounded: COFFER_FUZZ_RUNS cases per operation (default 120), seed COFFER_FUZZ_SEED (default fixed);
 * fast-check prints the seed and path of a failure to replay it.
 */
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import {
  type OpenApiDocument,
  type Operation,
  type RequestSpec,
  authHeaders,
  authSpec,
  operationsOf,
  requestSpec,
  resolve,
} from './arbitraries.js';
import { type Principal, expectationFor, principalOf } from './oracle.js';
import { send } from './wire.js';
import { ACTORS, ID_NAMES, type ActorName, type IdName, VISIBLE, type World, buildWorld, snapshot, useFuzzServer } from './world.js';

const RUNS = Number(process.env.COFFER_FUZZ_RUNS ?? 120);
const SEED = Number(process.env.COFFER_FUZZ_SEED ?? 20261121);

const clock = new ManualClock(Date.now());
const fx = useFuzzServer(clock);
let document: OpenApiDocument;
let operations: Operation[];
let world: World;
let port: number;
const tally = { cases: 0, rebuilds: 0, byStatus: {} as Record<string, number> };

beforeAll(async () => {
  document = (await (await fetch(`${fx.server.url}/openapi.json`)).json()) as OpenApiDocument;
  operations = operationsOf(document);
  port = Number(new URL(fx.server.url).port);
  world = await buildWorld(fx, clock);
});

function authWireValues(spec: RequestSpec, headers: [string, string | Buffer][]): { header: string; value: string }[] {
  return headers
    .filter(([name]) => ['authorization', 'x-api-key'].includes(name.toLowerCase()))
    .map(([name, value]) => ({ header: name.toLowerCase(), value: value.toString() }));
}

function decodes(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

const MUTATING_SUCCESS = (method: string, status: number) => method !== 'GET' && status >= 200 && status < 300;

const ATTESTATIONS = '/api/backups/{id}/attestations';
/** A JSON body that stands for a drill's attestation, made at send time (its ids are the world's of that moment). */
const ATTESTATION_OF = '__attestationOf';
interface AttestationOf {
  backup: IdName;
  account: ActorName;
}

/** The world's state (world.ts snapshot) and every attestation of its backups. */
async function stateOf(current: World) {
  const attestations: Record<string, unknown[]> = {};
  for (const id of Object.values(current.ids)) {
    attestations[id] = await fx.server.parts.stores.attestations.listBackupAttestations(id, 100);
  }
  return { ...(await snapshot(fx, current)), attestations };
}

/** The spec with a stand-in attestation body replaced by a real one: the backup's payload and an HMAC of it. */
function withAttestation(current: World, spec: RequestSpec): RequestSpec {
  const value = spec.body.kind === 'json' ? (spec.body.value as Record<string, AttestationOf> | null) : null;
  const of = value && typeof value === 'object' ? value[ATTESTATION_OF] : undefined;
  if (!of) return spec;
  const payload = Buffer.from(
    JSON.stringify({
      format: 'coffer-attestation/v1',
      accountId: current.actors[of.account].accountId,
      backupId: current.ids[of.backup],
      checkedAt: new Date(clock.now()).toISOString(),
      result: 'passed',
      failure: null,
      checks: ['download', 'decrypt'],
      ciphertextSizeBytes: 1,
      ciphertextSha256: null,
      plaintextSizeBytes: null,
      fileCount: null,
      vaultKey: '0123456789abcdef',
      drilledBy: { machine: 'fuzz', client: 'fuzz/1' },
    }),
  );
  const mac = createHmac('sha256', 'fuzz').update(payload).digest('base64');
  return { ...spec, body: { kind: 'json', value: { payload: payload.toString('base64'), mac } } };
}

/** The owner of each id (ID_NAMES), to name it in a payload. */
const OWNER_OF = Object.fromEntries(ID_NAMES.map((id) => [id, id[0] as ActorName])) as Record<IdName, ActorName>;

/**
 * Requests for POST …/attestations: as for any operation, plus attestations a drill would send (the owner's key, a
 * payload naming the backup and its account, or now and then another one), most of them for a visible backup.
 */
function attestationRequests(op: Operation): fc.Arbitrary<RequestSpec> {
  const visible = ACTORS.flatMap((actor) => VISIBLE[actor]);
  const drill = fc
    .tuple(
      requestSpec(document, op),
      fc.oneof({ arbitrary: fc.constantFrom(...visible), weight: 4 }, { arbitrary: fc.constantFrom(...ID_NAMES), weight: 1 }),
      fc.oneof({ arbitrary: fc.constant<IdName | null>(null), weight: 5 }, { arbitrary: fc.constantFrom(...ID_NAMES), weight: 1 }),
      fc.constantFrom<'all' | 'read'>('all', 'read'),
    )
    .map(([spec, id, named, kind]): RequestSpec => {
      const of: AttestationOf = { backup: named ?? id, account: OWNER_OF[named ?? id] };
      return {
        ...spec,
        id: { ref: id },
        auth: [{ header: 'authorization', spelling: 'lower', format: 'Bearer', key: { actor: OWNER_OF[id], kind } }],
        contentType: ['application/json'],
        body: { kind: 'json', value: { [ATTESTATION_OF]: of } },
      };
    });
  return fc.oneof(requestSpec(document, op), drill);
}

let dirty = false;

/** A case that failed may have changed state without the rebuild: the next one (a shrink step) starts afresh. */
async function runCase(...args: Parameters<typeof runOneCase>): Promise<void> {
  if (dirty) {
    world = await buildWorld(fx, clock);
    dirty = false;
  }
  try {
    await runOneCase(...args);
  } catch (error) {
    dirty = true;
    throw error;
  }
}

async function runOneCase(spec: RequestSpec): Promise<void> {
  tally.cases += 1;
  const { wire, path } = resolve(world, withAttestation(world, spec));
  const before = await stateOf(world);
  const response = await send(port, wire);
  const label = `${wire.method} ${path.slice(0, 200)} → ${response.status} ${response.text.slice(0, 300)}`;
  tally.byStatus[`${spec.op.method} ${spec.op.template} ${response.status}`] =
    (tally.byStatus[`${spec.op.method} ${spec.op.template} ${response.status}`] ?? 0) + 1;

  expect(response.status, label).toBeLessThan(500);
  fx.conformance.check(wire.method, path, response);

  const template = fx.conformance.templateOf(path);
  if (template === spec.op.template) {
    const principal: Principal = principalOf(world, spec, authWireValues(spec, wire.headers));
    const decodedId = 'ref' in spec.id ? world.ids[spec.id.ref] : null;
    const expected = expectationFor(world, spec, principal, decodedId);
    if (!decodes(path.split('?')[0]!)) {
      // A path that does not percent-decode names no route at all.
      expect(response.status, `${label}\nan undecodable path is no route`).toBe(404);
    } else if (expected.status !== undefined) {
      expect(response.status, `${label}\nexpected ${expected.status} because ${expected.why}`).toBe(expected.status);
      expect((response.body as { code: string }).code, label).toBe(expected.code);
    } else {
      expect([401, 403], `${label}\na valid key with the needed scope was refused`).not.toContain(response.status);
    }
  }

  if (response.frames && response.frames[0]?.event === 'backup.status') {
    fx.conformance.validate('#/components/schemas/BackupStatusEvent', JSON.parse(response.frames[0].data), label);
  }
  if (response.status === 200 && wire.method === 'GET' && template?.endsWith('/content')) {
    expect(response.raw.length, label).toBe(Number(response.headers.get('content-length')));
  }

  if (template === ATTESTATIONS && wire.method === 'POST' && response.status === 201) {
    // Recording an attestation adds one to its backup and changes nothing else: no rebuild needed.
    const after = await stateOf(world);
    const backupId = (response.body as { backupId: string }).backupId;
    expect(after.attestations[backupId]!.length, label).toBe(Math.min(before.attestations[backupId]!.length + 1, 20));
    expect({ ...after, attestations: null }, `${label}: an attestation changed more than its backup's list`).toEqual({
      ...before,
      attestations: null,
    });
    return;
  }
  if (MUTATING_SUCCESS(wire.method, response.status)) {
    const created = (response.body as { created?: boolean }).created;
    if (template === '/api/backup-account/bootstrap' && created === false) {
      expect(await stateOf(world), `${label}: bootstrap of an existing vault changed state`).toEqual(before);
      return;
    }
    tally.rebuilds += 1;
    world = await buildWorld(fx, clock);
    return;
  }
  expect(await stateOf(world), `${label}: a refused request (or a read) changed state`).toEqual(before);
}

describe('contract fuzzing of every /api operation', () => {
  // The owner's read of its host accounts (docs/api-rules.md#host-accounts) is not in this fuzzer's model yet (its
  // oracle knows one account per key); test/api/host-accounts.test.ts checks who may read them.
  // Neither is the s3-presigned-download extension (GET …/content-url): this server's fs store does not offer it, so it
  // answers as an unknown route before any check; test/api/content-url.test.ts checks its order of checks on S3.
  const NOT_MODELLED = ['GET /api/host-accounts', 'GET /api/host-accounts/{accountId}/backups', 'GET /api/backups/{id}/content-url'];
  const fuzzed = () => operations.filter((op) => !NOT_MODELLED.includes(`${op.method} ${op.template}`));

  it('the document has the 13 operations of the API, the 2 of host accounts, content-url and the 3 of attestations', () => {
    expect(fuzzed()).toHaveLength(16);
    expect(operations).toHaveLength(19);
  });

  const names = [
    'GET /api/backup-account',
    'PATCH /api/backup-account',
    'POST /api/backup-account/bootstrap',
    'POST /api/backup-account/rotate',
    'POST /api/backup-account/reset',
    'GET /api/backups',
    'POST /api/backups',
    'POST /api/backups/upload',
    'GET /api/backups/{id}',
    'DELETE /api/backups/{id}',
    'POST /api/backups/{id}/finalize',
    'GET /api/backups/{id}/content',
    'GET /api/backups/{id}/events',
    // Extension: restore attestations (docs/api-rules.md#attestations); an owner's read of its hosts' is not modelled.
    'POST /api/backups/{id}/attestations',
    'GET /api/backups/{id}/attestations',
    'GET /api/attestations',
  ];
  for (const name of names) {
    it(`${name}: declared statuses, valid bodies, order of checks, refusals change nothing`, async () => {
      const op = operations.find((o) => `${o.method} ${o.template}` === name);
      expect(op, `${name} is in /openapi.json`).toBeDefined();
      const requests = name === `POST ${ATTESTATIONS}` ? attestationRequests(op!) : requestSpec(document, op!);
      await fc.assert(fc.asyncProperty(requests, runCase), { numRuns: RUNS, seed: SEED, endOnFailure: false });
    }, 120_000);
  }

  it('unknown routes and methods: 404 or 405 with an ErrorResponse, and nothing changes', async () => {
    const known = Object.keys(document.paths).filter((path) => path.startsWith('/api/'));
    const path = fc.oneof(
      fc.constantFrom(...known),
      fc.constantFrom(...known).map((template) => `${template}/extra`),
      fc.constantFrom(
        '/api',
        '/api/',
        '/api/v1/backups',
        '/API/backups',
        '/api/backups//x',
        '/api/backup-account/',
        '/api/backups/{id}/content/',
        '/api/backups/{id}/finalize/x',
        '/api/%2e%2e/backups',
        '/api/backups/{id}/../content',
      ),
      fc.array(fc.webSegment(), { minLength: 1, maxLength: 4 }).map((segments) => `/api/${segments.join('/')}`),
    );
    const cases = fc.record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'),
      path,
      id: fc.constantFrom<IdName>('aReady1', 'aPending', 'bUploaded'),
      auth: authSpec,
      body: fc.option(fc.uint8Array({ maxLength: 100 }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const target = c.path.replace('{id}', world.ids[c.id]);
        const template = fx.conformance.templateOf(target);
        fc.pre(!(template && document.paths[template]?.[c.method.toLowerCase()]));
        // GET/DELETE /api/backups/upload: OpenAPI matches the literal path (no such method: 405), the router
        // the template /api/backups/{id} with the malformed id "upload" (401, then 404). Both are declared
        // answers; the fuzzer does not pick between the two readings.
        fc.pre(!(target === '/api/backups/upload' && (c.method === 'GET' || c.method === 'DELETE')));
        tally.cases += 1;
        const before = await stateOf(world);
        const headers = authHeaders(world, c.auth);
        if (c.body) headers.push(['Content-Type', 'application/json']);
        const response = await send(port, { method: c.method, target, headers, body: c.body ? Buffer.from(c.body) : undefined });
        const label = `${c.method} ${target} → ${response.status} ${response.text.slice(0, 200)}`;
        expect([404, 405], label).toContain(response.status);
        fx.conformance.check(c.method, target, response);
        if (response.status === 405) expect(response.headers.get('allow'), label).toBeTruthy();
        expect(await stateOf(world), `${label}: changed state`).toEqual(before);
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 120_000);

  it('reports what it tried: every operation was refused for a credential and for a scope, and got through', (ctx) => {
    ctx.skip(tally.cases === 0, 'runs after the fuzz tests of this file (none ran: filtered out)');
    console.log(`contract fuzzing: ${tally.cases} requests, ${tally.rebuilds} world rebuilds, seed ${SEED}, ${RUNS} runs per operation`);
    console.log(
      Object.entries(tally.byStatus)
        .sort()
        .map(([k, v]) => `  ${k}: ${v}`)
        .join('\n'),
    );
    // A fuzzer whose requests all stop at the same check tests that check only: each operation must have been
    // answered 401 (credential) and 403 (scope), 404 for an id that is not the caller's, and its own success
    // (a declared 2xx, or the 405 an operation that only refuses declares).
    const seen = new Map<string, Set<number>>();
    for (const key of Object.keys(tally.byStatus)) {
      const [method, template, status] = key.split(' ');
      const name = `${method} ${template}`;
      if (!seen.has(name)) seen.set(name, new Set());
      seen.get(name)!.add(Number(status));
    }
    expect([...seen.keys()].sort()).toEqual(
      fuzzed()
        .map((op) => `${op.method} ${op.template}`)
        .sort(),
    );
    const missing: string[] = [];
    for (const op of fuzzed()) {
      const name = `${op.method} ${op.template}`;
      const statuses = seen.get(name)!;
      const declared = Object.keys(document.paths[op.template]![op.method.toLowerCase()]!.responses ?? {}).map(Number);
      const success = declared.filter((status) => status >= 200 && status < 300);
      const wanted = [401, 403, ...(op.template.includes('{id}') ? [404] : [])];
      for (const status of wanted) if (!statuses.has(status)) missing.push(`${name} never answered ${status}`);
      const through = success.length > 0 ? success : [405];
      if (!through.some((status) => statuses.has(status))) missing.push(`${name} never answered ${through.join(' or ')}`);
      const tried = [...Object.entries(tally.byStatus)].filter(([key]) => key.startsWith(`${name} `)).reduce((sum, [, n]) => sum + n, 0);
      if (tried < RUNS) missing.push(`${name} was tried ${tried} times, fewer than ${RUNS}`);
    }
    expect(missing).toEqual([]);
    expect(tally.rebuilds).toBeGreaterThan(0);
  });
});
