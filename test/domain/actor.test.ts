/** One actor for the audit trail and the vault history (src/domain/audit.ts): the history's stored name of it. */
import { describe, expect, it } from 'vitest';
import { historyActor } from '../../src/domain/audit.js';

describe('historyActor', () => {
  it('names an API key by its id, a session by the key it was opened with or else by its id, an operator as such', () => {
    expect(historyActor({ kind: 'key', id: 'k-1' })).toBe('k-1');
    expect(historyActor({ kind: 'session', id: 's-1', keyId: 'k-2' })).toBe('k-2');
    expect(historyActor({ kind: 'session', id: 's-1', keyId: null })).toBe('session:s-1');
    expect(historyActor({ kind: 'session', id: 's-1' })).toBe('session:s-1');
    expect(historyActor({ kind: 'operator', id: 'alice' })).toBe('operator');
    expect(historyActor({ kind: 'operator', id: null })).toBe('operator');
  });
});
