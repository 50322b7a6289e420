/**
 * What the contract says about a generated request, independent of the server's code: who (if anyone) it
 * authenticates as, and what the order of checks (401 → 403 → 404 → 415 → 400 …) then forces.
 */
import { REQUIRED_SCOPE, type RequestSpec, keyOf } from './arbitraries.js';
import { VISIBLE, type ActorName, type KeyKind, type World } from './world.js';

export type Principal =
  { kind: 'none' } | { kind: 'ambiguous' } | { kind: 'invalid' } | { kind: 'key'; actor: ActorName; keyKind: KeyKind };

/** Header values as the server receives them: HTTP strips surrounding whitespace. */
const trimmed = (value: string) => value.replace(/^[ \t]+|[ \t]+$/g, '');

/**
 * docs/api-rules.md#scopes: either `Authorization: Bearer <key>` or `x-api-key: <key>`. Every credential line
 * counts; two lines naming different secrets are ambiguous and refused, like the two headers disagreeing.
 */
export function principalOf(world: World, spec: RequestSpec, wireValues: { header: string; value: string }[]): Principal {
  const candidates = new Set<string>();
  for (const { header, value } of wireValues) {
    const text = trimmed(value);
    if (header === 'authorization') {
      const match = /^Bearer\s+(\S+)$/i.exec(text);
      if (match) candidates.add(match[1]!);
    } else if (text !== '') {
      candidates.add(text);
    }
  }
  if (candidates.size === 0) return { kind: 'none' };
  if (candidates.size > 1) return { kind: 'ambiguous' };
  const secret = [...candidates][0]!;
  for (const line of spec.auth) {
    if ('garbage' in line.key || keyOf(world, line.key) !== secret) continue;
    const { actor, kind } = line.key;
    if (kind === 'revoked' || kind === 'expired') return { kind: 'invalid' };
    return { kind: 'key', actor, keyKind: kind };
  }
  return { kind: 'invalid' };
}

export interface Expectation {
  /** The exact status the contract forces, when it forces one. */
  status?: number;
  code?: string;
  why?: string;
}

/** The status the contract forces for this request on this operation, if any. */
export function expectationFor(world: World, spec: RequestSpec, principal: Principal, decodedId: string | null): Expectation {
  const operation = `${spec.op.method} ${spec.op.template}`;
  if (principal.kind !== 'key') return { status: 401, code: 'authentication_required', why: `credential is ${principal.kind}` };
  const scopes = world.actors[principal.actor].scopes[principal.keyKind];
  const needed = REQUIRED_SCOPE[operation]!;
  if (!scopes.includes(needed)) return { status: 403, code: 'insufficient_scope', why: `key ${principal.keyKind} lacks ${needed}` };
  if (spec.op.pathParams.includes('id')) {
    const visible = VISIBLE[principal.actor].map((name) => world.ids[name]);
    if (decodedId === null || !visible.includes(decodedId)) {
      return { status: 404, code: 'backup_not_found', why: `id is not one of ${principal.actor}'s visible backups` };
    }
  }
  return {};
}
