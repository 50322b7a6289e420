/**
 * HTTP framing fuzzing: requests for /api operations (as in api.test.ts) whose bytes are then broken the way
 * fetch and node:http never would: bytes that are not ASCII in the request target and header names, control
 * characters in header values, obsolete line folding, bare LF/CR line ends, conflicting or malformed
 * Content-Length, Content-Length with Transfer-Encoding, unknown transfer codings, bad chunk sizes, missing
 * or repeated Host, odd request lines, oversized heads, leading empty lines and pipelined garbage.
 *
 * For each case: never a 5xx; either the request was understood (then the answer conforms to /openapi.json)
 * or it is refused at the protocol level with a 4xx; nothing changed unless a write was understood and
 * succeeded; and the server keeps serving a normal request afterwards. A request that announces more bytes
 * than it sends leaves the server waiting (rightly): after SILENCE_MS the client hangs up, like a broken
 * client, and then the aborted request must leave nothing behind once the server has noticed.
 *
 * Bounded: COFFER_FUZZ_RUNS (default 120) × 2 cases, seed COFFER_FUZZ_SEED.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { type OpenApiDocument, type Operation, type RequestSpec, operationsOf, requestSpec, resolve } from './arbitraries.js';
import { NoResponse, Silence, type WireRequest, exchange, send } from './wire.js';
import { type World, buildWorld, snapshot, useFuzzServer } from './world.js';

const RUNS = Number(process.env.COFFER_FUZZ_RUNS ?? 120) * 2;
const SEED = Number(process.env.COFFER_FUZZ_SEED ?? 20261121);

const clock = new ManualClock(Date.now());
const fx = useFuzzServer(clock);
let document: OpenApiDocument;
let operations: Operation[];
let world: World;
let port: number;
const SILENCE_MS = 1500;
const tally = { cases: 0, understood: 0, refused: {} as Record<string, number>, closedWithoutAnswer: 0, waited: 0, pipelined: 0 };

beforeAll(async () => {
  document = (await (await fetch(`${fx.server.url}/openapi.json`)).json()) as OpenApiDocument;
  operations = operationsOf(document);
  port = Number(new URL(fx.server.url).port);
  world = await buildWorld(fx, clock);
});

type Framing =
  | { kind: 'target-bytes'; bytes: number[] }
  | { kind: 'header-line'; line: number[] }
  | { kind: 'content-length'; values: string[] }
  | { kind: 'transfer-encoding'; value: string; sizeLine: string | null; withLength: boolean }
  | { kind: 'line-ending'; eol: '\n' | '\r' | '\r\r\n' }
  | { kind: 'request-line'; line: string }
  | { kind: 'host'; count: 0 | 2 }
  | { kind: 'oversize'; where: 'header' | 'target' }
  | { kind: 'leading-empty-lines'; count: number }
  | { kind: 'trailing'; bytes: number[] };

const byte = (min: number, max: number) => fc.integer({ min, max });
const framing: fc.Arbitrary<Framing> = fc.oneof(
  fc.record({
    kind: fc.constant('target-bytes' as const),
    bytes: fc.array(fc.oneof(byte(0x80, 0xff), byte(0, 0x20), fc.constant(0x7f)), { minLength: 1, maxLength: 4 }),
  }),
  fc.record({
    kind: fc.constant('header-line' as const),
    line: fc.oneof(
      fc
        .constantFrom(
          'Bad Name: 1',
          'NoColon',
          ': empty-name',
          'X-A\t: tab-before-colon',
          'X-A : space-before-colon',
          '(x): 1',
          'X-A: a\u0000b',
          'X-A: a\u0001b',
          'X-A: a\u007fb',
          'X-A: a\rb',
          ' X-Folded: 1',
        )
        .map((s) => [...Buffer.from(s, 'latin1')]),
      fc
        .tuple(fc.array(byte(0x80, 0xff), { minLength: 1, maxLength: 3 }))
        .map(([bad]) => [...Buffer.from('X-'), ...bad, ...Buffer.from(': 1')]),
      fc
        .tuple(fc.array(byte(0, 0x1f), { minLength: 1, maxLength: 2 }))
        .map(([bad]) => [...Buffer.from('X-Ctl: a'), ...bad, ...Buffer.from('b')]),
    ),
  }),
  fc.record({
    kind: fc.constant('content-length' as const),
    values: fc.oneof(
      fc
        .constantFrom(['-1'], ['+2'], ['0x10'], ['abc'], [''], ['99999999999999999999'], ['1e3'], ['2, 2'], ['2,3'], [' 2 '])
        .map((v) => [...v]),
      fc.tuple(fc.nat(3000), fc.nat(3000)).map(([a, b]) => [String(a), String(b)]),
      fc.nat(20).map((n) => [String(n)]),
    ),
  }),
  fc.record({
    kind: fc.constant('transfer-encoding' as const),
    value: fc.constantFrom(
      'chunked',
      'Chunked',
      'chunked, chunked',
      'gzip, chunked',
      'chunked, gzip',
      'xchunked',
      'chunked ',
      'identity',
      'identity, chunked',
      '\tchunked',
      'chunked;q=1',
      'compress',
    ),
    sizeLine: fc.option(
      fc.constantFrom('zz', '-1', 'ffffffffffffffffff', '0x10', '1;ext=\u0001', ' 5', '5 ', '', '00000000000000000000001'),
      { nil: null },
    ),
    withLength: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('line-ending' as const), eol: fc.constantFrom('\n' as const, '\r' as const, '\r\r\n' as const) }),
  fc.record({
    kind: fc.constant('request-line' as const),
    line: fc.constantFrom(
      'get {target} HTTP/1.1',
      'FOO {target} HTTP/1.1',
      '{method}  {target} HTTP/1.1',
      '{method} {target}  HTTP/1.1',
      '{method} {target} HTTP/1.2',
      '{method} {target} HTTP/2.0',
      '{method} {target} HTTP/1.0',
      '{method} {target} http/1.1',
      '{method} {target}',
      '{method} http://evil.example{target} HTTP/1.1',
      '{method} //evil.example{target} HTTP/1.1',
      '{method} * HTTP/1.1',
      '{method} {target} HTTP/1.1 extra',
      '{method}\t{target} HTTP/1.1',
      'TRACE {target} HTTP/1.1',
      'PRI * HTTP/2.0',
    ),
  }),
  fc.record({ kind: fc.constant('host' as const), count: fc.constantFrom(0 as const, 2 as const) }),
  fc.record({ kind: fc.constant('oversize' as const), where: fc.constantFrom('header' as const, 'target' as const) }),
  fc.record({ kind: fc.constant('leading-empty-lines' as const), count: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('trailing' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => [...b]) }),
);

/** The bytes of `request` with one framing defect. */
function build(request: WireRequest, defect: Framing): Buffer {
  let target = Buffer.from(request.target, 'latin1');
  if (defect.kind === 'target-bytes') target = Buffer.concat([target, Buffer.from(defect.bytes)]);
  if (defect.kind === 'oversize' && defect.where === 'target') target = Buffer.concat([target, Buffer.from(`?pad=${'a'.repeat(70_000)}`)]);
  let requestLine = Buffer.concat([Buffer.from(`${request.method} `), target, Buffer.from(' HTTP/1.1')]);
  if (defect.kind === 'request-line') {
    requestLine = Buffer.from(defect.line.replace('{method}', request.method).replace('{target}', request.target), 'latin1');
  }
  const body = request.body ?? Buffer.alloc(0);
  const lines: Buffer[] = [requestLine];
  const host = defect.kind === 'host' ? defect.count : 1;
  for (let i = 0; i < host; i++) lines.push(Buffer.from(`Host: 127.0.0.${i + 1}`));
  for (const [name, value] of request.headers)
    lines.push(Buffer.concat([Buffer.from(`${name}: `, 'latin1'), Buffer.from(value.toString(), 'latin1')]));
  if (defect.kind === 'header-line') lines.push(Buffer.from(defect.line));
  if (defect.kind === 'oversize' && defect.where === 'header') lines.push(Buffer.from(`X-Pad: ${'a'.repeat(20_000)}`));
  let payload = body;
  if (defect.kind === 'content-length') {
    for (const value of defect.values) lines.push(Buffer.from(`Content-Length: ${value}`));
  } else if (defect.kind === 'transfer-encoding') {
    lines.push(Buffer.from(`Transfer-Encoding: ${defect.value}`));
    if (defect.withLength) lines.push(Buffer.from(`Content-Length: ${body.length}`));
    const size = defect.sizeLine ?? body.length.toString(16);
    // An empty body is the last chunk alone ("0" twice would be a complete request and then garbage).
    payload =
      size === '0' ? Buffer.from('0\r\n\r\n') : Buffer.concat([Buffer.from(`${size}\r\n`, 'latin1'), body, Buffer.from('\r\n0\r\n\r\n')]);
  } else if (request.body !== undefined) {
    lines.push(Buffer.from(`Content-Length: ${body.length}`));
  }
  lines.push(Buffer.from('Connection: close'));
  const eol = Buffer.from(defect.kind === 'line-ending' ? defect.eol : '\r\n');
  const head = Buffer.concat(lines.flatMap((line) => [line, eol]).concat(eol));
  const leading = defect.kind === 'leading-empty-lines' ? Buffer.from('\r\n'.repeat(defect.count)) : Buffer.alloc(0);
  const trailing = defect.kind === 'trailing' ? Buffer.from(defect.bytes) : Buffer.alloc(0);
  return Buffer.concat([leading, head, payload, trailing]);
}

/** Statuses Node's HTTP parser (via Fastify's client-error handler) uses for requests it cannot parse. */
const PROTOCOL_REFUSALS = [400, 413, 414, 431];

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

async function runOneCase(spec: RequestSpec, defect: Framing): Promise<void> {
  tally.cases += 1;
  const { wire, path } = resolve(world, spec);
  const label = `${JSON.stringify(defect).slice(0, 200)} on ${wire.method} ${path.slice(0, 120)}`;
  await settle(label);
  const before = await snapshot(fx, world);
  let response;
  let waited = false;
  try {
    response = await exchange(port, build(wire, defect), SILENCE_MS);
  } catch (error) {
    // Closing without an answer is a refusal too (Node does so for CONNECT and some parse errors); silence
    // means the server waits for bytes that will never come.
    if (error instanceof Silence) {
      waited = true;
      tally.waited += 1;
    } else if (error instanceof NoResponse) {
      tally.closedWithoutAnswer += 1;
    } else {
      throw error;
    }
  }
  if (response) expect(response.status, `${label} → ${response.status} ${response.text.slice(0, 300)}`).toBeLessThan(500);
  if (pipelines(wire, defect)) {
    // The bytes hold a complete request and then more: Node answers the garbage after it with a 400 (written
    // ahead of the first answer) while the first request runs on. What it did is not knowable from here.
    tally.pipelined += 1;
    world = await buildWorld(fx, clock);
    await stillServing(label);
    return;
  }
  if (response) {
    const body = response.body as Record<string, unknown>;
    const routed = typeof body === 'object' && body !== null && 'resolution' in body;
    if (routed || response.status < 400) {
      // Understood as HTTP and answered by the API: the answer must be one the contract allows.
      tally.understood += 1;
      if (response.status >= 400) fx.conformance.validate('#/components/schemas/ErrorResponse', body, label);
      if (defect.kind !== 'request-line') fx.conformance.check(wire.method, path, response);
    } else {
      const key = `${response.status} ${defect.kind}`;
      tally.refused[key] = (tally.refused[key] ?? 0) + 1;
      expect(PROTOCOL_REFUSALS, `${label} → ${response.status} ${response.text.slice(0, 300)}`).toContain(response.status);
    }
    if (response.status >= 200 && response.status < 300 && !['GET', 'get'].includes(wire.method)) {
      world = await buildWorld(fx, clock);
      return;
    }
  }
  const outcome = response ? `${response.status} ${response.text.slice(0, 200)}` : waited ? 'silence, client hung up' : 'no answer';
  let after = await snapshot(fx, world);
  // A request refused below the API (the parser failed in its body, or the client hung up) may still be in
  // its handler, which cleans up after the connection is gone: wait for that, boundedly.
  const body = response?.body;
  const belowApi = !(typeof body === 'object' && body !== null && 'resolution' in body);
  for (let i = 0; belowApi && i < 50 && JSON.stringify(after) !== JSON.stringify(before); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    after = await snapshot(fx, world);
  }
  expect(after, `${label} → ${outcome}: a refused request changed state`).toEqual(before);
  await stillServing(label);
}

/** Temp files and multipart leftovers of earlier cases must be gone (boundedly soon): none may leak. */
async function settle(label: string): Promise<void> {
  let leftovers: string[] = [];
  for (let i = 0; i < 50; i++) {
    const { tmp, uploads } = await snapshot(fx, world);
    leftovers = [...Object.keys(tmp), ...Object.keys(uploads)];
    if (leftovers.length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`before ${label}: temp files or multipart uploads leaked by an earlier request: ${leftovers.join(', ')}`);
}

async function stillServing(label: string): Promise<void> {
  const check = await send(port, {
    method: 'GET',
    target: '/api/backup-account',
    headers: [['Authorization', `Bearer ${world.actors.a.keys.all}`]],
  });
  expect(check.status, `${label}: the server stopped answering normally`).toBe(200);
}

/** Whether the bytes are a complete request followed by more (trailing bytes, a Content-Length too small). */
function pipelines(request: WireRequest, defect: Framing): boolean {
  if (defect.kind === 'trailing') return true;
  if (defect.kind !== 'content-length') return false;
  const length = request.body?.length ?? 0;
  return defect.values.some((value) => /^\s*\+?\d+\s*$/.test(value) && Number(value) < length);
}

describe('HTTP framing fuzzing of /api operations', () => {
  it('never a 5xx, refusals change nothing, the server keeps serving', async () => {
    const specs = fc.constantFrom(...operations).chain((op) => requestSpec(document, op));
    await fc.assert(fc.asyncProperty(specs, framing, runCase), { numRuns: RUNS, seed: SEED });
    console.log(
      `framing fuzzing: ${tally.cases} requests (seed ${SEED}), ${tally.understood} understood, ` +
        `${tally.closedWithoutAnswer} closed without an answer, ${tally.waited} left waiting, ${tally.pipelined} pipelined; ` +
        `protocol refusals:\n` +
        Object.entries(tally.refused)
          .sort()
          .map(([k, v]) => `  ${k}: ${v}`)
          .join('\n'),
    );
  }, 120_000);
});
