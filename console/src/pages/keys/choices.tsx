/** What the key forms offer: the permissions and what each allows, the lifetimes, the append-only restriction. */
import type { Scope } from '../../api.js';
import { valueOf } from '../../ui/forms.js';

export const SCOPE_HELP: Record<Scope, string> = {
  'backups:read': 'read the vault and list backups',
  'backups:write': 'make, finish and delete backups; manage the vault',
  'backups:restore': 'download encrypted archives',
};

const EXPIRY: { label: string; days: number | null }[] = [
  { label: '7 days', days: 7 },
  { label: '30 days', days: 30 },
  { label: '90 days', days: 90 },
  { label: '1 year', days: 365 },
  { label: 'Never', days: null },
];

export const APPEND_ONLY_HELP =
  'can add backups, but never delete them, reset the account or change the vault: for hosts that may be stolen';

/** A key's lifetime: "never" or a number of days, as the select holds it; days or null as the API takes it. */
export const expiresInDays = (value: string): number | null => (value === 'never' ? null : Number(value));

export function ExpirySelect({ id, value, onValue }: { id: string; value: string; onValue: (value: string) => void }) {
  return (
    <select id={id} value={value} onChange={(event) => onValue(valueOf(event))}>
      {EXPIRY.map((option) => (
        <option key={option.label} value={option.days === null ? 'never' : String(option.days)}>
          {option.label}
        </option>
      ))}
    </select>
  );
}
