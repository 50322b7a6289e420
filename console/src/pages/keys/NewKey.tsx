/** A key just made, shown this once to copy, with what it may do and until when. */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { CreatedKey } from '../../api.js';
import { When } from '../../format.js';

export function NewKey({ created, onDone }: { created: CreatedKey; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  const copy = async () => {
    field.current?.select();
    try {
      await navigator.clipboard.writeText(created.apiKey);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div class="success new-key" role="region" aria-labelledby="new-key-title">
      <h3 id="new-key-title">Your new key</h3>
      <p>
        <strong>Copy it now: it is shown only this once.</strong> The server keeps only a hash of it.
      </p>
      <label for="new-key-value">API key</label>
      <div class="copy-row">
        <input
          id="new-key-value"
          ref={field}
          class="mono"
          readOnly
          value={created.apiKey}
          onFocus={(e) => (e.target as HTMLInputElement).select()}
        />
        <button type="button" class="secondary" onClick={copy}>
          Copy
        </button>
      </div>
      <p aria-live="polite" class="help">
        {copied ? (
          'Copied to the clipboard.'
        ) : (
          <>
            Permissions: {created.scopes.join(', ')}
            {created.appendOnly && ' (append-only)'}. Expires: <When at={created.expiresAt} empty="never" />.
            {created.expiryCapped && ' A key made here cannot outlive the key you signed in with, so it expires with that key.'}
          </>
        )}
      </p>
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </div>
  );
}
