/** A one-time sign-in link to the owners' console for an account's owner, made on the operator's demand. */
import { useState } from 'preact/hooks';
import { call, when, type OwnerLinkData } from './api.js';

export function OwnerLink({ id, setError }: { id: string; setError: (error: unknown) => void }) {
  const [link, setLink] = useState<OwnerLinkData | null>(null);
  return (
    <section class="panel" aria-labelledby="owner-link">
      <h2 id="owner-link">Sign-in link for the owner</h2>
      <p class="help">A one-time link to the owners' console, valid 15 minutes. Give it to the owner only.</p>
      <button
        type="button"
        class="secondary"
        onClick={async () => {
          setError(null);
          try {
            setLink(await call('POST /accounts/:id/login-link', { params: { id } }));
          } catch (failure) {
            setError(failure);
          }
        }}
      >
        Make a sign-in link
      </button>
      {link && (
        <p class="copy-row">
          <input class="mono" readOnly value={link.url} aria-label="Owner sign-in link" />
          <span class="muted">until {when(link.expiresAt)}</span>
        </p>
      )}
    </section>
  );
}
