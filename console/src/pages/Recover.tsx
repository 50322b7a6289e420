/** Recovery with the kit: the kit's words typed into the page set a new passphrase (the same keys, wrapped anew). */
import { plural } from '../format.js';
import type { ComponentChildren, RefObject } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { ApiError } from '../api.js';
import { forgetKeys } from '../key-use.js';
import { KitRefused, recoverWithKit, VaultChanged, type Recovered } from '../recover.js';
import { BASE } from '../router.js';
import { SecretField } from '../secret-field.js';
import { letStatusRender, useUnlock } from '../unlock.js';
import { valueOf } from '../ui/forms.js';

/** Why nothing was recovered, and the field it is about (focused when it is the kit). */
interface Refusal {
  field: 'kit' | 'passphrase' | null;
  message: ComponentChildren;
}

async function refusal(caught: unknown): Promise<Refusal> {
  const { KitFormatError } = await import('../crypto/kit.js');
  if (caught instanceof KitFormatError)
    return { field: 'kit', message: <>The kit could not be read: {caught.message}. Nothing was changed.</> };
  if (caught instanceof KitRefused) return { field: 'kit', message: refusalText(caught) };
  if (caught instanceof VaultChanged) return { field: null, message: caught.message };
  if (caught instanceof ApiError) return { field: null, message: `${caught.message} ${caught.resolution}` };
  return { field: null, message: `The recovery did not finish: ${caught instanceof Error ? caught.message : String(caught)}` };
}

function refusalText({ reason, opened, checked }: KitRefused): ComponentChildren {
  if (reason === 'foreign') {
    return (
      <>
        <strong>This kit does not open your backups</strong> (none of {plural(checked, 'ready backup')}): it belongs to another vault, or is
        older than every backup's key. Nothing was changed.
      </>
    );
  }
  if (reason === 'partial') {
    return (
      <>
        <strong>
          This kit opens only {opened} of {plural(checked, 'ready backup')}.
        </strong>{' '}
        The others use a key it does not hold (a <code>coffer rekey</code> after the kit was printed?). Recovering with it would make them
        unreadable for good, so nothing was changed. Type the words of the newest kit; to accept the loss, use{' '}
        <code>coffer recover --force</code>.
      </>
    );
  }
  return (
    <>
      <strong>There is no ready backup to check the kit against</strong>, so this page cannot confirm that it belongs to this vault, and a
      wrong kit would replace the vault's key. Nothing was changed. (<code>coffer recover --force</code> accepts an unchecked kit.)
    </>
  );
}

function RecoveredNotice({ result }: { result: Recovered }) {
  return (
    <div class="success" role="status">
      <p>
        <strong>Vault recovered.</strong> The kit ({plural(result.keys, 'key')}) opened {result.opened} of{' '}
        {plural(result.checked, 'ready backup')}. Your new passphrase now unlocks the vault; its recipient is the kit's current key (
        <span class="mono">{result.fingerprint}</span>).
      </p>
      <p>
        <a href={BASE}>Go to your backups</a>
      </p>
    </div>
  );
}

/** The form's fields: the kit's words, the new passphrase twice. */
interface KitFields {
  words: string;
  passphrase: string;
  repeat: string;
}

function KitForm({
  fields,
  edit,
  invalid,
  busy,
  kitField,
  onSubmit,
}: {
  fields: KitFields;
  edit: (change: Partial<KitFields>) => void;
  invalid: (field: 'kit' | 'passphrase') => boolean;
  busy: boolean;
  kitField: RefObject<HTMLTextAreaElement>;
  onSubmit: (event: Event) => void;
}) {
  const { words, passphrase, repeat } = fields;
  return (
    <form onSubmit={onSubmit} autoComplete="off">
      <label for="kit-words">Recovery kit words</label>
      <textarea
        id="kit-words"
        ref={kitField}
        class="kit-words"
        autoComplete="off"
        autoCapitalize="off"
        autoCorrect="off"
        spellcheck={false}
        value={words}
        onInput={(event) => edit({ words: valueOf(event) })}
        aria-describedby="kit-help"
        aria-invalid={invalid('kit') ? 'true' : undefined}
        required
        disabled={busy}
      />
      <p class="help" id="kit-help">
        The 24 words of each key line, the current key (key 1) first, separated by spaces or new lines. You may also paste the whole kit.
      </p>
      <SecretField
        id="new-passphrase"
        label="New passphrase"
        value={passphrase}
        onValue={(value) => edit({ passphrase: value })}
        autoComplete="new-password"
        invalid={invalid('passphrase')}
        required
        disabled={busy}
      />
      <SecretField
        id="repeat-passphrase"
        label="Repeat the new passphrase"
        value={repeat}
        onValue={(value) => edit({ repeat: value })}
        autoComplete="new-password"
        invalid={invalid('passphrase')}
        required
        disabled={busy}
      />
      <button type="submit" disabled={busy || !words.trim() || !passphrase || !repeat}>
        Check the kit and set the new passphrase
      </button>
    </form>
  );
}

export function RecoverPage() {
  const [fields, setFields] = useState<KitFields>({ words: '', passphrase: '', repeat: '' });
  const kitField = useRef<HTMLTextAreaElement>(null);
  const { state, busy, run, refuse } = useUnlock<Recovered, Refusal>({
    describe: refusal,
    focusOnError: ({ failure }) => (failure.field === 'kit' ? kitField : null),
  });

  const recover = (event: Event) => {
    event.preventDefault();
    const { words, passphrase, repeat } = fields;
    if (!words.trim() || !passphrase) return;
    if (passphrase !== repeat) {
      refuse({ field: 'passphrase', message: 'The two new passphrases do not match.' });
      return;
    }
    void run(async () => {
      await letStatusRender();
      const result = await recoverWithKit(words, passphrase);
      setFields({ words: '', passphrase: '', repeat: '' });
      forgetKeys();
      return result;
    });
  };

  const invalid = (field: 'kit' | 'passphrase') => state.phase === 'error' && state.failure.field === field;
  return (
    <section>
      <p class="crumbs">
        <a href={`${BASE}/vault`}>Vault</a> › Recover
      </p>
      <h1 tabIndex={-1}>Recover with your kit</h1>
      <p class="lede">
        Forgot the passphrase? Type the words of your recovery kit (<code>coffer kit</code> printed it) to set a new one. The words are
        decoded and checked in this page and are never sent anywhere: only the new wrapping of your keys goes to the server, as{' '}
        <code>coffer recover</code> does.
      </p>
      <p class="notice">
        Whoever holds the kit can read every backup. Type it only on a device you trust, and keep the paper as safe as the passphrase.
      </p>
      {state.phase === 'done' ? (
        <RecoveredNotice result={state.result} />
      ) : (
        <KitForm
          fields={fields}
          edit={(change) => setFields((now) => ({ ...now, ...change }))}
          invalid={invalid}
          busy={busy}
          kitField={kitField}
          onSubmit={recover}
        />
      )}
      <div aria-live="polite" role="status">
        {busy && <p>Checking the kit against your backups, then wrapping the keys under the new passphrase (Argon2id)…</p>}
      </div>
      {state.phase === 'error' && (
        <div class="error" role="alert">
          <p>{state.failure.message}</p>
        </div>
      )}
    </section>
  );
}
