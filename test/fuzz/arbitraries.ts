/**
 * Request generators derived from the server's own /openapi.json: for every operation, valid requests
 * (bodies built from the declared JSON Schemas) and mutated ones (wrong types, missing and unknown
 * properties, `__proto__`/`constructor` keys, huge strings, deep nesting, broken JSON, bytes that are not
 * UTF-8, odd content types, missing, garbled, duplicate and disagreeing credentials).
 *
 * Requests are generated as symbolic specs (`{ ref: 'bUploaded' }`, `{ actor: 'a', kind: 'read' }`) and
 * resolved against the current world at send time, so a failing case replays and shrinks across rebuilds.
 */
import fc from 'fast-check';
import { ACTORS, ID_NAMES, KEY_KINDS, SIZES, VISIBLE, type ActorName, type IdName, type KeyKind, type World } from './world.js';
import type { HeaderLine, WireRequest } from './wire.js';

type Schema = Record<string, any>;
export interface OpenApiDocument {
  paths: Record<string, Record<string, any>>;
  components: { schemas: Record<string, Schema> };
}

export interface Operation {
  method: string;
  template: string;
  /** Path parameter names, in order. */
  pathParams: string[];
  queryParams: { name: string; schema: Schema }[];
  /** Request body media types and their schemas. */
  body: Record<string, Schema> | null;
  bodyRequired: boolean;
}

/** docs/api-rules.md#scopes: the scope each operation needs (not part of the OpenAPI document). */
export const REQUIRED_SCOPE: Record<string, string> = {
  'GET /api/backup-account': 'backups:read',
  'PATCH /api/backup-account': 'backups:write',
  'POST /api/backup-account/bootstrap': 'backups:write',
  'POST /api/backup-account/rotate': 'backups:write',
  'POST /api/backup-account/reset': 'backups:write',
  'GET /api/backups': 'backups:read',
  'POST /api/backups': 'backups:write',
  'POST /api/backups/upload': 'backups:write',
  'GET /api/backups/{id}': 'backups:read',
  'DELETE /api/backups/{id}': 'backups:write',
  'POST /api/backups/{id}/finalize': 'backups:write',
  'GET /api/backups/{id}/content': 'backups:restore',
  'GET /api/backups/{id}/events': 'backups:read',
  'POST /api/backups/{id}/attestations': 'backups:read',
  'GET /api/backups/{id}/attestations': 'backups:read',
  'GET /api/attestations': 'backups:read',
};

export function operationsOf(document: OpenApiDocument): Operation[] {
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(document.paths)) {
    if (!template.startsWith('/api/')) continue;
    for (const [method, operation] of Object.entries<any>(item)) {
      const parameters: any[] = operation.parameters ?? [];
      const content = operation.requestBody?.content as Record<string, { schema: Schema }> | undefined;
      operations.push({
        method: method.toUpperCase(),
        template,
        pathParams: parameters.filter((p) => p.in === 'path').map((p) => p.name),
        queryParams: parameters.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema })),
        body: content ? Object.fromEntries(Object.entries(content).map(([type, media]) => [type, media.schema])) : null,
        bodyRequired: operation.requestBody?.required === true,
      });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------------------
// Values from JSON Schemas

const BASE64_PATTERN = '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$';

/** Constants worth trying for integer properties of this name (the sizes the world was built with). */
const INTEGER_HINTS: Record<string, number[]> = {
  ciphertextSizeBytes: [SIZES.bUploaded, SIZES.bReady, 0],
  plaintextSizeBytes: [SIZES.bUploaded, 0],
};

function resolveRef(document: OpenApiDocument, schema: Schema): Schema {
  let current = schema;
  while (typeof current.$ref === 'string') {
    const name = current.$ref.replace('#/components/schemas/', '');
    current = document.components.schemas[name]!;
  }
  return current;
}

/** Values that validate against `schema` (most of the time: decoded-size bounds are the server's business). */
export function valueOf(document: OpenApiDocument, input: Schema, name = ''): fc.Arbitrary<unknown> {
  const schema = resolveRef(document, input);
  if (Array.isArray(schema.anyOf)) return fc.oneof(...schema.anyOf.map((s: Schema) => valueOf(document, s, name)));
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  switch (schema.type) {
    case 'object': {
      const properties: Record<string, Schema> = schema.properties ?? {};
      const required: string[] = schema.required ?? [];
      const model = Object.fromEntries(Object.entries(properties).map(([key, s]) => [key, valueOf(document, s, key)]));
      const record = fc.record(model, { requiredKeys: required });
      if (schema.additionalProperties === false || Object.keys(properties).length > 0) return record;
      return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
    }
    case 'string': {
      if (schema.pattern === BASE64_PATTERN) {
        const maxBytes = Math.floor((schema.maxLength ?? 88) * 0.75);
        // The decoded-size bounds are in the description, e.g. "base64 (16–1024 bytes)" or "(1 byte–64 KiB)".
        const bounds = /\((\d+)\s*(?:bytes?)?\s*[–-]\s*(\d+)\s*(bytes|KiB)\)/.exec(schema.description ?? '');
        const [lo, hi] = bounds ? [Number(bounds[1]), Number(bounds[2]) * (bounds[3] === 'KiB' ? 1024 : 1)] : [0, maxBytes];
        const size = fc.oneof(
          { arbitrary: fc.integer({ min: lo, max: Math.min(hi, lo + 64) }), weight: 9 },
          { arbitrary: fc.integer({ min: 0, max: maxBytes }), weight: 1 },
        );
        return size.chain((n) => fc.uint8Array({ minLength: n, maxLength: n })).map((b) => Buffer.from(b).toString('base64'));
      }
      if (schema.format === 'uuid') return fc.uuid();
      if (schema.format === 'date-time') return fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
      if (schema.pattern === '^[\\x20-\\x7E]*$') {
        return fc.string({
          unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
          maxLength: schema.maxLength ?? 64,
        });
      }
      return fc.string({ maxLength: schema.maxLength ?? 32 });
    }
    case 'integer': {
      const range = fc.integer({ min: schema.minimum ?? -1000, max: Math.min(schema.maximum ?? 2 ** 40, Number.MAX_SAFE_INTEGER) });
      const hints = INTEGER_HINTS[name];
      return hints ? fc.oneof(fc.constantFrom(...hints), range) : range;
    }
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valueOf(document, schema.items ?? {}), { maxLength: 3 });
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Mutations

const HOSTILE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '', ' ', '$ref', '\u0000'];

/** Values of every type, including the awkward ones. */
const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 2, '', ' ', '0', 'true', 'null', 'v2', 'V1', [], {}),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom({ __proto__: null }, JSON.parse('{"__proto__": {"polluted": true}}'), { constructor: { prototype: { polluted: true } } }),
);

/** Paths (lists of keys) of every property in a JSON value, nested ones included. */
function pathsOf(value: unknown, prefix: string[] = []): string[][] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  return Object.keys(value).flatMap((key) => [[...prefix, key], ...pathsOf((value as Record<string, unknown>)[key], [...prefix, key])]);
}

function clone<T>(value: T): T {
  return value === undefined ? value : JSON.parse(JSON.stringify(value));
}

function setAt(root: unknown, path: string[], value: unknown): unknown {
  const copy = clone(root) as Record<string, unknown>;
  let node: Record<string, unknown> = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>;
  Object.defineProperty(node, path[path.length - 1]!, { value, enumerable: true, configurable: true, writable: true });
  return copy;
}

function deleteAt(root: unknown, path: string[]): unknown {
  const copy = clone(root) as Record<string, unknown>;
  let node: Record<string, unknown> = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>;
  delete node[path[path.length - 1]!];
  return copy;
}

export type BodySpec =
  { kind: 'none' } | { kind: 'json'; value: unknown } | { kind: 'text'; text: string } | { kind: 'bytes'; bytes: Uint8Array };

/** A JSON-ish body: valid, or one of many ways of being wrong. */
export function jsonBody(document: OpenApiDocument, schema: Schema): fc.Arbitrary<BodySpec> {
  const valid = valueOf(document, schema);
  const mutated = valid.chain((value) => {
    const paths = pathsOf(value);
    const pick = paths.length > 0 ? fc.constantFrom(...paths) : fc.constant<string[]>([]);
    const options: fc.Arbitrary<BodySpec>[] = [
      // An unknown (or hostile) property at the top or at any nested object.
      fc
        .tuple(fc.oneof(fc.constantFrom(...HOSTILE_KEYS), fc.string({ maxLength: 10 })), wrongValue, fc.constantFrom([], ...paths))
        .map(([key, extra, at]) => {
          const target = at.reduce<any>((node, k) => node?.[k], value);
          const where = target !== null && typeof target === 'object' && !Array.isArray(target) ? at : [];
          return { kind: 'json' as const, value: setAt(value, [...where, key], extra) };
        }),
      // Raw JSON text with a hostile key (JSON.parse makes __proto__ an own property).
      fc.constantFrom(...HOSTILE_KEYS).map((key) => ({
        kind: 'text' as const,
        text: JSON.stringify(value).replace(/^\{/, `{${JSON.stringify(key)}:{"polluted":true}${pathsOf(value).length ? ',' : ''}`),
      })),
      // Duplicate keys: the last one wins in JSON.parse.
      pick.chain((path) =>
        wrongValue.map((extra) => ({
          kind: 'text' as const,
          text:
            path.length === 1
              ? JSON.stringify(value).replace(/\}$/, `,${JSON.stringify(path[0])}:${JSON.stringify(extra)}}`)
              : JSON.stringify(value),
        })),
      ),
    ];
    if (paths.length > 0) {
      options.push(
        pick.map((path) => ({ kind: 'json' as const, value: deleteAt(value, path) })),
        fc.tuple(pick, wrongValue).map(([path, extra]) => ({ kind: 'json' as const, value: setAt(value, path, extra) })),
        // Huge strings, under and over the 256 KiB JSON limit.
        fc
          .tuple(pick, fc.constantFrom(1000, 70_000, 200_000, 300_000), fc.constantFrom('A', 'é', '\u{1F600}', '=', '\\', '"'))
          .map(([path, length, unit]) => ({ kind: 'json' as const, value: setAt(value, path, unit.repeat(length)) })),
        // Deep nesting in place of a property.
        fc.tuple(pick, fc.constantFrom(64, 1000, 20_000), fc.constantFrom('[', '{"a":')).map(([path, depth, open]) => {
          const marker = '"__DEEP__"';
          const close = open === '[' ? ']' : '}';
          const text = JSON.stringify(setAt(value, path, '__DEEP__')).replace(marker, `${open.repeat(depth)}1${close.repeat(depth)}`);
          return { kind: 'text' as const, text };
        }),
      );
    }
    return fc.oneof(...options);
  });
  const textual = fc.oneof(
    fc.constantFrom(
      '',
      ' ',
      '\n',
      'null',
      'true',
      '0',
      '"x"',
      '[]',
      '{}',
      '[{}]',
      '{',
      '}',
      '{"',
      '{"a":}',
      '{,}',
      "{'a':1}",
      'NaN',
      '{"deleteBackups":true',
      '\uFEFF{}',
      '{} {}',
      '{}garbage',
      '/* */{}',
      '1e999',
      '-0',
      '1'.repeat(400),
    ),
    fc.json({ maxDepth: 3 }).map((text) => text),
    valid.chain((v) => fc.nat({ max: Math.max(0, JSON.stringify(v).length - 1) }).map((cut) => JSON.stringify(v).slice(0, cut))),
    fc.constantFrom(1000, 100_000).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
  );
  const bytes = fc.oneof(
    // Valid JSON with bytes that are not UTF-8 inside a string, or outside any string.
    fc
      .tuple(valid, fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xc0, 0xaf], [0x00], [0xfe, 0xff]))
      .map(([v, bad]) => {
        const text = Buffer.from(JSON.stringify(v));
        const quote = text.indexOf('"', 2);
        const at = quote > 0 && bad.length % 2 ? quote : 1;
        return {
          kind: 'bytes' as const,
          bytes: new Uint8Array(Buffer.concat([text.subarray(0, at), Buffer.from(bad), text.subarray(at)])),
        };
      }),
    fc.uint8Array({ maxLength: 64 }).map((b) => ({ kind: 'bytes' as const, bytes: b })),
    // UTF-16 and UTF-32 encodings of a valid body.
    valid.map((v) => ({ kind: 'bytes' as const, bytes: new Uint8Array(Buffer.from(JSON.stringify(v), 'utf16le')) })),
  );
  return fc.oneof(
    { arbitrary: valid.map((value) => ({ kind: 'json' as const, value })), weight: 4 },
    { arbitrary: mutated, weight: 5 },
    { arbitrary: textual.map((text) => ({ kind: 'text' as const, text })), weight: 2 },
    { arbitrary: bytes, weight: 2 },
    { arbitrary: fc.constant({ kind: 'none' as const }), weight: 1 },
  );
}

/** An octet-stream body: usually small, sometimes empty. */
const binaryBody: fc.Arbitrary<BodySpec> = fc.oneof(
  fc.uint8Array({ minLength: 0, maxLength: 3000 }).map((bytes) => ({ kind: 'bytes' as const, bytes })),
  fc.constantFrom(0, 1, SIZES.aPending, SIZES.bUploaded).map((n) => ({ kind: 'bytes' as const, bytes: new Uint8Array(n) })),
);

// ---------------------------------------------------------------------------------------------------------
// Ids, credentials, headers

export type IdSpec = { ref: IdName } | { text: string; encode: boolean };

const hostileIdText = fc.oneof(
  fc.constantFrom(
    '',
    'null',
    'undefined',
    '__proto__',
    'constructor',
    'prototype',
    '..',
    '.',
    '../backups',
    '%2e%2e',
    '00000000-0000-0000-0000-000000000000',
    'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
    '01234567-89ab-cdef-0123-456789abcdef ',
    "' OR 1=1 --",
    '%00',
    '%ff',
    '%C3%28',
    '%ED%A0%80',
    '%',
    '%Z',
    '%E2%82',
    'a'.repeat(5000),
    '\u0000',
    '😀',
    'Ω≈ç√',
    '{id}',
    '*',
    '?x',
    '#frag',
  ),
  fc.string({ maxLength: 40 }),
  // Longer than a router's default parameter limit (100), up to a few KiB.
  fc.constantFrom(
    ...['a', '0', '-'].flatMap((unit) => [101, 1000, 4000].map((n) => unit.repeat(n))),
    '%41'.repeat(101),
    '%41'.repeat(1000),
  ),
  fc.uuid(),
  fc.uuid().map((u) => u.toUpperCase()),
  fc.uuid().map((u) => u.replace(/-/g, '')),
);

export const idSpec: fc.Arbitrary<IdSpec> = fc.oneof(
  { arbitrary: fc.constantFrom(...ID_NAMES).map((ref) => ({ ref })), weight: 5 },
  { arbitrary: fc.tuple(hostileIdText, fc.boolean()).map(([text, encode]) => ({ text, encode })), weight: 3 },
);

export type KeySpec = { actor: ActorName; kind: KeyKind } | { garbage: string };

const keySpec: fc.Arbitrary<KeySpec> = fc.oneof(
  { arbitrary: fc.record({ actor: fc.constantFrom(...ACTORS), kind: fc.constantFrom(...KEY_KINDS) }), weight: 6 },
  {
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          '',
          ' ',
          'cfk_',
          `cfk_${'A'.repeat(43)}`,
          `cfk_${'A'.repeat(42)}`,
          'null',
          'undefined',
          'Bearer',
          '\u00ff\u00fe',
          'a'.repeat(4000),
        ),
        fc.string({ maxLength: 60 }).map((s) => s.replace(/[\r\n]/g, '')),
        fc.stringMatching(/^cfk_[A-Za-z0-9_-]{43}$/),
      )
      .map((garbage) => ({ garbage })),
    weight: 1,
  },
);

export type AuthFormat = 'Bearer' | 'bearer' | 'BEARER' | 'Bearer  ' | 'Basic' | 'Token' | 'raw' | 'Bearer-only' | 'trailing-space';

export interface AuthLine {
  header: 'authorization' | 'x-api-key';
  /** How the header name is spelled on the wire. */
  spelling: 'lower' | 'upper' | 'title';
  format: AuthFormat;
  key: KeySpec;
}

const authLine: fc.Arbitrary<AuthLine> = fc.record({
  header: fc.constantFrom('authorization' as const, 'x-api-key' as const),
  spelling: fc.constantFrom('lower' as const, 'upper' as const, 'title' as const),
  format: fc.oneof(
    { arbitrary: fc.constant('Bearer' as const), weight: 8 },
    {
      arbitrary: fc.constantFrom(
        'bearer',
        'BEARER',
        'Bearer  ',
        'Basic',
        'Token',
        'raw',
        'Bearer-only',
        'trailing-space',
      ) as fc.Arbitrary<AuthFormat>,
      weight: 2,
    },
  ),
  key: keySpec,
});

/** Credential header lines: mostly one good key, else absent, garbled, duplicated, agreeing or disagreeing. */
export const authSpec = fc.oneof(
  {
    arbitrary: fc
      .record({
        header: fc.constantFrom('authorization' as const, 'x-api-key' as const),
        spelling: fc.constantFrom('lower' as const, 'title' as const),
        format: fc.constant('Bearer' as const),
        key: fc.constantFrom(...ACTORS).map((actor): KeySpec => ({ actor, kind: 'all' })),
      })
      .map((line) => [line]),
    weight: 12,
  },
  { arbitrary: authLine.map((line) => [line]), weight: 4 },
  { arbitrary: fc.constant([]), weight: 1 },
  // The same key in both headers, or two different ones.
  {
    arbitrary: fc.tuple(authLine, fc.boolean()).chain(([line, same]) =>
      (same ? fc.constant(line.key) : keySpec).map((key) => [
        { ...line, header: 'authorization' as const, format: 'Bearer' as const },
        { ...line, header: 'x-api-key' as const, key },
      ]),
    ),
    weight: 2,
  },
  { arbitrary: fc.array(authLine, { minLength: 2, maxLength: 3 }), weight: 1 },
) as fc.Arbitrary<AuthLine[]>;

export const contentTypeSpec = fc.oneof(
  {
    arbitrary: fc.constantFrom(['application/json'], ['application/json; charset=utf-8'], ['application/octet-stream']),
    weight: 6,
  },
  {
    arbitrary: fc.constantFrom(
      [],
      ['APPLICATION/JSON'],
      ['application/json; charset=latin1'],
      ['application/json;charset=utf-16'],
      ['application/json ; x="y"'],
      ['application/jsonx'],
      ['application/problem+json'],
      ['application/vnd.api+json'],
      ['text/plain'],
      ['text/json'],
      ['multipart/form-data; boundary=x'],
      ['application/x-www-form-urlencoded'],
      ['application/octet-stream; charset=utf-8'],
      ['Application/Octet-Stream'],
      ['*/*'],
      [''],
      [';;;'],
      ['application/'],
      ['\u00ff\u00fe/json'],
      ['application/json', 'application/octet-stream'],
      ['application/octet-stream', 'application/json'],
      ['text/plain', 'application/json'],
    ),
    weight: 3,
  },
) as unknown as fc.Arbitrary<string[]>;

export interface RequestSpec {
  op: Operation;
  id: IdSpec;
  query: [string, IdSpec | string][];
  auth: AuthLine[];
  contentType: string[];
  body: BodySpec;
  chunkSize?: number;
  extraHeaders: HeaderLine[];
  range?: string;
}

const extraHeaders = fc.oneof(
  { arbitrary: fc.constant([]), weight: 6 },
  {
    arbitrary: fc.subarray<HeaderLine>([
      ['Accept', 'text/event-stream'],
      ['Accept', '*/*'],
      ['Accept-Encoding', 'gzip, br'],
      ['Last-Event-ID', '999999999999'],
      ['Origin', 'https://evil.example'],
      ['X-Forwarded-For', '1.2.3.4'],
      ['X-Vercel-Signature', 'deadbeef'],
      ['Expect', '100-continue'],
      ['If-None-Match', '*'],
      ['X-Http-Method-Override', 'DELETE'],
      ['Cookie', 'session=1'],
      ['X-Binary', '\u00ff\u00fe\u00c3\u0028'],
      ['X-Long', 'x'.repeat(3000)],
      ['__proto__', 'polluted'],
      ['constructor', 'x'],
    ]),
    weight: 2,
  },
) as fc.Arbitrary<HeaderLine[]>;

const rangeSpec = fc.option(
  fc.oneof(
    fc.constantFrom(
      'bytes=0-0',
      'bytes=0-99',
      'bytes=100-',
      'bytes=-10',
      'bytes=5-2',
      'bytes=0-1,5-6',
      'bytes=999999-',
      'bytes=-0',
      'items=0-1',
      'bytes=',
      'bytes=a-b',
      'bytes=0-18446744073709551616',
    ),
    fc.tuple(fc.nat(5000), fc.nat(5000)).map(([a, b]) => `bytes=${a}-${b}`),
  ),
  { nil: undefined },
);

/** Requests for one operation: half of them anything, half of them coherent (see coherent()). */
export function requestSpec(document: OpenApiDocument, op: Operation): fc.Arbitrary<RequestSpec> {
  return fc.oneof(anyRequest(document, op), coherent(document, op));
}

/**
 * A request that could succeed: the owner's all-scope key, one of the owner's visible ids (in the path or
 * as backupId), the declared content type and a schema-valid body most of the time. Still fuzzed: the id may
 * be in any state, the body may be mutated, and headers, range and framing vary as in anyRequest().
 */
function coherent(document: OpenApiDocument, op: Operation): fc.Arbitrary<RequestSpec> {
  // Slots in flight (PENDING_UPLOAD, UPLOADED) are where upload and finalize can succeed: three times as likely.
  const pairs = ACTORS.flatMap((actor) =>
    (VISIBLE[actor].length ? VISIBLE[actor] : [null]).flatMap((id) =>
      Array<readonly [ActorName, IdName | null]>(id === 'aPending' || id === 'bUploaded' ? 3 : 1).fill([actor, id] as const),
    ),
  );
  const json = op.body?.['application/json'];
  const body: fc.Arbitrary<BodySpec> =
    op.template === '/api/backups/upload'
      ? binaryBody
      : json
        ? fc.oneof(
            { arbitrary: valueOf(document, json).map((value): BodySpec => ({ kind: 'json', value })), weight: 3 },
            { arbitrary: jsonBody(document, json), weight: 1 },
          )
        : fc.constant({ kind: 'none' });
  const contentType = op.template === '/api/backups/upload' ? ['application/octet-stream'] : json ? ['application/json'] : [];
  return fc.tuple(anyRequest(document, op), fc.constantFrom(...pairs), body, fc.boolean()).map(([spec, [actor, id], chosenBody, exact]) => {
    const idSpec: IdSpec = id ? { ref: id } : spec.id;
    // Half the time a finalize body names the size that was really uploaded.
    if (exact && id && chosenBody.kind === 'json' && isObject(chosenBody.value) && 'ciphertextSizeBytes' in chosenBody.value) {
      chosenBody = { kind: 'json', value: { ...chosenBody.value, ciphertextSizeBytes: SIZES[id] } };
    }
    return {
      ...spec,
      id: idSpec,
      query: op.queryParams.some((p) => p.name === 'backupId') ? [['backupId', idSpec] as [string, IdSpec]] : spec.query,
      auth: [{ header: 'authorization', spelling: 'lower', format: 'Bearer', key: { actor, kind: 'all' } }],
      contentType,
      body: chosenBody,
    };
  });
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

function anyRequest(document: OpenApiDocument, op: Operation): fc.Arbitrary<RequestSpec> {
  let body: fc.Arbitrary<BodySpec>;
  if (op.body?.['application/json'] && op.body['application/octet-stream']) {
    body = fc.oneof(binaryBody, jsonBody(document, op.body['application/json']));
  } else if (op.body?.['application/json']) {
    body = jsonBody(document, op.body['application/json']);
  } else {
    // No body declared: usually none, sometimes one anyway (it must be ignored).
    body = fc.oneof(
      { arbitrary: fc.constant<BodySpec>({ kind: 'none' }), weight: 4 },
      { arbitrary: fc.uint8Array({ maxLength: 200 }).map((bytes): BodySpec => ({ kind: 'bytes', bytes })), weight: 1 },
      { arbitrary: fc.jsonValue({ maxDepth: 2 }).map((value): BodySpec => ({ kind: 'json', value })), weight: 1 },
    );
  }
  const queryValue = fc.oneof(idSpec, fc.string({ maxLength: 20 }));
  const query = fc.oneof(
    {
      arbitrary: op.queryParams.length
        ? fc
            .tuple(
              ...op.queryParams.map((p) =>
                fc.option(
                  idSpec.map((v) => [p.name, v] as [string, IdSpec]),
                  { nil: undefined },
                ),
              ),
            )
            .map((pairs) => pairs.filter((p): p is [string, IdSpec] => p !== undefined))
        : fc.constant([]),
      weight: 6,
    },
    {
      arbitrary: fc.array(
        fc.tuple(
          fc.oneof(
            fc.constantFrom(
              ...op.queryParams.map((p) => p.name),
              'backupId',
              'backupId[]',
              '__proto__',
              'constructor',
              '__proto__[polluted]',
              'constructor[prototype][x]',
              '',
            ),
            fc.string({ maxLength: 8 }),
          ),
          queryValue,
        ),
        { minLength: 1, maxLength: 3 },
      ),
      weight: 2,
    },
  ) as fc.Arbitrary<[string, IdSpec | string][]>;
  return fc.record({
    op: fc.constant(op),
    id: idSpec,
    query,
    auth: authSpec,
    contentType: op.body ? contentTypeSpec : fc.oneof({ arbitrary: fc.constant([]), weight: 3 }, { arbitrary: contentTypeSpec, weight: 1 }),
    body,
    chunkSize: fc.option(fc.constantFrom(1, 7, 1024, 65_536), { nil: undefined }),
    extraHeaders,
    range: op.template.endsWith('/content') ? rangeSpec : fc.constant(undefined),
  }) as fc.Arbitrary<RequestSpec>;
}

// ---------------------------------------------------------------------------------------------------------
// Resolution against a world

export function keyOf(world: World, key: KeySpec): string {
  return 'garbage' in key ? key.garbage : world.actors[key.actor].keys[key.kind];
}

/** encodeURIComponent, except that a lone surrogate (which it refuses) goes as U+FFFD. */
const encode = (text: string) => encodeURIComponent(text.replace(/\p{Cs}/gu, '\uFFFD'));

function idText(world: World, id: IdSpec): string {
  if ('ref' in id) return world.ids[id.ref];
  if (!id.encode) return id.text.replace(/[^\u0021-\u007e]/gu, encode).replace(/[/?#]/g, encode);
  return encode(id.text);
}

const SPELL = {
  lower: (name: string) => name,
  upper: (name: string) => name.toUpperCase(),
  title: (name: string) => name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase()),
};

function authValue(line: AuthLine, key: string): string {
  if (line.header === 'x-api-key') {
    return line.format === 'Bearer' || line.format === 'raw' ? key : line.format === 'trailing-space' ? `${key} ` : `${line.format} ${key}`;
  }
  switch (line.format) {
    case 'raw':
      return key;
    case 'Bearer-only':
      return 'Bearer';
    case 'trailing-space':
      return `Bearer ${key} `;
    default:
      return `${line.format} ${key}`;
  }
}

/** The credential header lines of `auth`, as sent. */
export function authHeaders(world: World, auth: AuthLine[]): HeaderLine[] {
  return auth.map((line) => [SPELL[line.spelling](line.header), authValue(line, keyOf(world, line.key))]);
}

function bodyBytes(body: BodySpec): Buffer | undefined {
  switch (body.kind) {
    case 'none':
      return undefined;
    case 'json':
      return Buffer.from(JSON.stringify(body.value) ?? 'null');
    case 'text':
      return Buffer.from(body.text);
    case 'bytes':
      return Buffer.from(body.bytes);
  }
}

export interface Resolved {
  wire: WireRequest;
  /** The concrete path with query, for the conformance check. */
  path: string;
}

export function resolve(world: World, spec: RequestSpec): Resolved {
  const id = idText(world, spec.id);
  const path = spec.op.template.replace('{id}', id);
  const query = spec.query
    .map(([name, value]) => `${encode(name)}=${typeof value === 'string' ? encode(value) : idText(world, value)}`)
    .join('&');
  const target = query ? `${path}?${query}` : path;
  const headers: HeaderLine[] = authHeaders(world, spec.auth);
  for (const type of spec.contentType) headers.push(['Content-Type', type]);
  if (spec.range !== undefined) headers.push(['Range', spec.range]);
  headers.push(...spec.extraHeaders);
  const body = bodyBytes(spec.body);
  // At most 256 chunks: a 300 KB body in 1-byte chunks tests nothing more than 256 of them, only slower.
  const chunkSize = body && spec.chunkSize !== undefined ? Math.max(spec.chunkSize, Math.ceil(body.length / 256)) : undefined;
  return { wire: { method: spec.op.method, target, headers, body, chunkSize }, path: target };
}
