/** The decoded sizes of the binary (base64) fields clients send: envelopes and finalize bodies. */
import type { ValidationIssue } from '../domain/errors.js';

/** Decoded-size bounds of binary fields, in bytes (docs/api-rules.md#encoding). */
const BINARY_BOUNDS: Record<string, [number, number]> = {
  salt: [8, 64],
  wrappedMasterKeyNonce: [8, 64],
  wrappedDekNonce: [8, 64],
  encryptedMetadataNonce: [8, 64],
  wrappedMasterKey: [16, 4096],
  wrappedDek: [16, 4096],
  encryptedMetadata: [1, 65_536],
};

/** Checks decoded sizes of base64 fields (the schema already checked the alphabet and padding). */
export function binaryIssues(fields: Record<string, string>, prefix = ''): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const [name, value] of Object.entries(fields)) {
    const [min, max] = BINARY_BOUNDS[name]!;
    const bytes = Buffer.byteLength(value, 'base64');
    if (bytes < min || bytes > max) {
      issues.push({ path: `${prefix}${name}`, message: `must decode to ${min}–${max} bytes, got ${bytes}` });
    }
  }
  return issues;
}
