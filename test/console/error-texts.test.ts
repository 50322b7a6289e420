/**
 * The console page's table of refusal texts (console/src/error-texts.ts): one row for every error code of the API,
 * either the page's words or the server's resolution (FROM_SERVER, listed here so that a change is deliberate), and
 * no row that speaks the HTTP API to a person at the page.
 */
import { describe, expect, it } from 'vitest';
import { CONSOLE_ERROR_TEXTS, consoleErrorText, consoleMessage, FROM_SERVER, PERMISSION_USES } from '../../console/src/error-texts.js';
import { API_INTERNALS, RESOLUTION_OF, STATUS_OF, type ErrorCode } from '../../src/domain/errors.js';
import { SCOPES } from '../../src/domain/scopes.js';

const CODES = Object.keys(STATUS_OF) as ErrorCode[];
/** The codes the page shows with the server's resolution (when that does not speak API internals). */
const SERVER_WORDED: ErrorCode[] = [
  'login_link_invalid',
  'vault_changed',
  'ciphertext_size_mismatch',
  'payload_too_large',
  'quota_exceeded',
  'upload_exceeds_quota',
  'too_many_sign_in_attempts',
  'too_many_streams',
];
const DETAILS: Record<string, unknown>[] = [{}, { reason: 'append_only' }, ...SCOPES.map((requiredPermission) => ({ requiredPermission }))];

describe("the console page's error texts", () => {
  it('have one row for every error code, and none for codes the API does not have', () => {
    expect(Object.keys(CONSOLE_ERROR_TEXTS).sort()).toEqual([...CODES].sort());
  });

  it('show the server’s resolution exactly for the codes listed as such', () => {
    expect(CODES.filter((code) => CONSOLE_ERROR_TEXTS[code] === FROM_SERVER).sort()).toEqual([...SERVER_WORDED].sort());
  });

  it('speak the page, never the HTTP API', () => {
    for (const code of CODES.filter((code) => CONSOLE_ERROR_TEXTS[code] !== FROM_SERVER)) {
      for (const details of DETAILS) {
        const text = consoleErrorText(code, details, RESOLUTION_OF[code]);
        expect(text, code).not.toMatch(API_INTERNALS);
        expect(text.length, code).toBeGreaterThan(20);
      }
    }
  });

  it('name what each permission allows', () => {
    for (const scope of SCOPES) expect(PERMISSION_USES[scope]).toMatch(/\w/);
    expect(consoleErrorText('insufficient_scope', { requiredPermission: 'backups:write' }, '')).toBe(
      'This key may not make and delete backups (it lacks backups:write). Sign in with a key that holds read, write ' +
        'and restore, or ask your operator for one (coffer admin keys create).',
    );
  });

  it('fall back to the server’s resolution unless it speaks the API', () => {
    expect(consoleErrorText('too_many_sign_in_attempts', {}, 'Wait a minute.')).toBe('Wait a minute.');
    expect(consoleErrorText('quota_exceeded', {}, RESOLUTION_OF.quota_exceeded)).toBe('');
    expect(consoleErrorText('some_new_code', {}, 'Do the new thing.')).toBe('Do the new thing.');
    expect(consoleErrorText('constructor', {}, 'See GET /api/backups.')).toBe('');
    expect(consoleMessage('The quota is used up.')).toBe('The quota is used up.');
    expect(consoleMessage('Send an x-api-key header.')).toBe('The server refused this request.');
    expect(consoleMessage(undefined)).toBe('The server refused this request.');
  });
});
