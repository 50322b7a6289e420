/** What both SDK entries (Node and browser) export of restore attestations (docs/crypto.md#restore-attestations). */
export {
  ATTESTATION_FORMAT,
  DRILL_CHECKS,
  signAttestation,
  verifyAttestation,
  type AttestationVerdict,
  type DrillCheck,
  type DrillOutcome,
} from './attestation.js';
