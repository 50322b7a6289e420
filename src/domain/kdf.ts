/** The named Argon2id cost profiles a new wrapping may use (their limits: KDF_PROFILES in src/client/envelope-core.ts). */
export const KDF_PROFILE_NAMES = ['min', 'interactive', 'moderate', 'sensitive'] as const;
export type KdfProfile = (typeof KDF_PROFILE_NAMES)[number];
/** The profile of new vaults and passphrase changes unless the user picks another. */
export const DEFAULT_KDF_PROFILE: KdfProfile = 'moderate';
