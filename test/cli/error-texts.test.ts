/**
 * The CLI's table of refusal texts (src/cli/error-texts.ts): one row for every error code of the API, either the
 * CLI's words or the server's (FROM_SERVER, listed here so that a change is deliberate), and no row that speaks the
 * HTTP API to a person at the terminal.
 */
import { describe, expect, it } from 'vitest';
import { CLI_ERROR_TEXTS, cliErrorText, FROM_SERVER, PERMISSION_USES, type CliRefusal } from '../../src/cli/error-texts.js';
import { API_INTERNALS, RESOLUTION_OF, STATUS_OF, type ErrorCode } from '../../src/domain/errors.js';
import { SCOPES } from '../../src/domain/scopes.js';

const CODES = Object.keys(STATUS_OF) as ErrorCode[];
/** The codes the CLI shows in the server's words (its message, and its resolution when that is the user's). */
const SERVER_WORDED: ErrorCode[] = [
  'csrf_token_invalid',
  'reauthentication_required',
  'login_link_invalid',
  'quota_exceeded',
  'upload_exceeds_quota',
  'too_many_sign_in_attempts',
  'too_many_streams',
];

const refusal = (details: Record<string, unknown>, message = 'Refused.'): CliRefusal => ({
  details,
  message,
  nextBackupAllowed: 'at 10:00, in 3 hours',
  serverIsHere: false,
});
const DETAILS: Record<string, unknown>[] = [
  {},
  { reason: 'append_only' },
  ...SCOPES.map((requiredPermission) => ({ requiredPermission })),
  { backupInterval: '1d', accountId: '0190a0a0-0000-7000-8000-000000000001', plan: 'free' },
  { remainingBackups: 2 },
  { status: 'READY' },
];

describe("the CLI's error texts", () => {
  it('have one row for every error code, and none for codes the API does not have', () => {
    expect(Object.keys(CLI_ERROR_TEXTS).sort()).toEqual([...CODES].sort());
  });

  it('show the server’s words exactly for the codes listed as such', () => {
    expect(CODES.filter((code) => CLI_ERROR_TEXTS[code] === FROM_SERVER).sort()).toEqual([...SERVER_WORDED].sort());
  });

  it('speak commands and settings, never the HTTP API', () => {
    for (const code of CODES.filter((code) => CLI_ERROR_TEXTS[code] !== FROM_SERVER)) {
      for (const details of DETAILS) {
        const text = cliErrorText(code, refusal(details), RESOLUTION_OF[code]);
        expect(text, code).not.toMatch(API_INTERNALS);
        expect(text.length, code).toBeGreaterThan(20);
      }
    }
  });

  it('name what each permission allows', () => {
    for (const scope of SCOPES) expect(PERMISSION_USES[scope]).toMatch(/\w/);
    expect(cliErrorText('insufficient_scope', refusal({ requiredPermission: 'backups:restore' }), '')).toBe(
      'this API key is not allowed to download backups (restore): it lacks the backups:restore permission. Use a key that ' +
        "has it (create one on the console's Keys page, or ask the operator: coffer admin keys create --scopes backups:restore) " +
        'and set COFFER_API_KEY to it.',
    );
  });

  it('fall back to the server’s message and resolution, leaving out what speaks the API', () => {
    const quota = RESOLUTION_OF.quota_exceeded;
    expect(API_INTERNALS.test(quota)).toBe(true);
    expect(cliErrorText('quota_exceeded', refusal({}, 'The quota is used up.'), quota)).toBe(
      'the server refused (quota_exceeded): The quota is used up.',
    );
    expect(cliErrorText('too_many_sign_in_attempts', refusal({}, 'Too many attempts.'), 'Wait a minute.')).toBe(
      'the server refused (too_many_sign_in_attempts): Too many attempts. Wait a minute.',
    );
    // A code this CLI does not know (a newer server), and one whose words all speak the API.
    expect(cliErrorText('some_new_code', refusal({}, 'New refusal.'), 'Do the new thing.')).toBe(
      'the server refused (some_new_code): New refusal. Do the new thing.',
    );
    expect(cliErrorText('toString', refusal({}, 'See /api/backups.'), 'Send x-api-key.')).toBe(
      'the server refused (toString): check that COFFER_URL points at a Coffer server of a matching version.',
    );
  });
});
