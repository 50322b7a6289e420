/** API key permissions (docs/api-rules.md#scopes). */
export const SCOPES = ['backups:read', 'backups:write', 'backups:restore'] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
