/** Plans, scopes and the error vocabulary (src/domain), called directly. */
import { describe, expect, it } from 'vitest';
import { AppError, RESOLUTION_OF, STATUS_OF, type ErrorCode } from '../../src/domain/errors.js';
import { PLANS, PLAN_RULES, isPlan, rateLimitPolicy } from '../../src/domain/plans.js';
import { SCOPES, isScope } from '../../src/domain/scopes.js';

describe('plans', () => {
  it('X-RateLimit-Policy names the window in seconds and the interval in words (docs/api-rules.md#cadence)', () => {
    expect(PLANS.map((plan) => [plan, PLAN_RULES[plan].interval, rateLimitPolicy(plan)])).toEqual([
      ['free', '1d', '1;w=86400;comment="free plan: 1 backup per day"'],
      ['plus', '4h', '1;w=14400;comment="plus plan: 1 backup per 4 hours"'],
      ['pro', '30m', '1;w=1800;comment="pro plan: 1 backup per 30 minutes"'],
    ]);
  });

  it('isPlan and isScope accept exactly the listed names', () => {
    const cases: [string, boolean, boolean][] = [
      ['free', true, false],
      ['pro', true, false],
      ['Free', false, false],
      ['enterprise', false, false],
      ['', false, false],
      ['toString', false, false],
      ['backups:read', false, true],
      ['backups:write', false, true],
      ['backups:restore', false, true],
      ['backups:*', false, false],
    ];
    for (const [name, plan, scope] of cases) expect([isPlan(name), isScope(name)], name).toEqual([plan, scope]);
    expect(SCOPES).toEqual(['backups:read', 'backups:write', 'backups:restore']);
  });
});

describe('errors', () => {
  it('an AppError carries the HTTP status of its code', () => {
    const cases: [ErrorCode, number][] = [
      ['validation_failed', 400],
      ['authentication_required', 401],
      ['insufficient_scope', 403],
      ['backup_not_found', 404],
      ['upload_in_progress', 409],
      ['payload_too_large', 413],
      ['backup_cadence_exceeded', 429],
      ['internal_error', 500],
    ];
    for (const [code, status] of cases) expect(new AppError(code, 'x').status, code).toBe(status);
  });

  it('every code has one resolution sentence', () => {
    for (const code of Object.keys(STATUS_OF) as ErrorCode[]) {
      expect(RESOLUTION_OF[code], code).toMatch(/^[A-Z].*\.$/);
      expect(RESOLUTION_OF[code], code).not.toContain('\n');
    }
    expect(Object.keys(RESOLUTION_OF).sort()).toEqual(Object.keys(STATUS_OF).sort());
  });

  it('AppError.validation lists the issues under details.issues', () => {
    const error = AppError.validation([{ path: '/name', message: 'must be a string' }]);
    expect([error.code, error.status, error.message, error.details]).toEqual([
      'validation_failed',
      400,
      'The request is not valid.',
      { issues: [{ path: '/name', message: 'must be a string' }] },
    ]);
  });
});
