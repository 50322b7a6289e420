/** "Create a key": a label, permissions, append-only or not, a lifetime; the key made is shown once (NewKey). */
import { useState } from 'preact/hooks';
import { KEY_LABEL_MAX, keyLabelProblem } from '../../../../src/domain/keys.js';
import { SCOPES, api, type CreatedKey, type Scope } from '../../api.js';
import { caughtAdvice } from '../../caught.js';
import { useFreshAction } from '../../fresh-action.js';
import { APPEND_ONLY_HELP, ExpirySelect, SCOPE_HELP, expiresInDays } from './choices.js';
import { NewKey } from './NewKey.js';
import { valueOf, checkedOf } from '../../ui/forms.js';

interface KeyChoice {
  label: string;
  scopes: Set<Scope>;
  appendOnly: boolean;
  expiry: string;
}

function KeyForm({
  choice,
  edit,
  submit,
}: {
  choice: KeyChoice;
  edit: (change: Partial<KeyChoice>) => void;
  submit: (event: Event) => void;
}) {
  const toggle = (scope: Scope, on: boolean) => {
    const next = new Set(choice.scopes);
    if (on) next.add(scope);
    else next.delete(scope);
    edit({ scopes: next });
  };
  return (
    <form onSubmit={submit}>
      <label for="key-label">
        Label <span class="muted">(optional: which device or script uses it, e.g. “laptop”)</span>
      </label>
      <input
        id="key-label"
        type="text"
        maxLength={KEY_LABEL_MAX}
        autoComplete="off"
        value={choice.label}
        onInput={(event) => edit({ label: valueOf(event) })}
        aria-describedby="key-label-help"
      />
      <p id="key-label-help" class="help">
        Up to {KEY_LABEL_MAX} letters, digits, spaces and . _ - @ : / ( ) # + , '. Shown in the list below and in Activity.
      </p>
      <fieldset>
        <legend>Permissions</legend>
        {SCOPES.map((scope) => (
          <div class="check" key={scope}>
            <input
              type="checkbox"
              id={`scope-${scope}`}
              name="scopes"
              value={scope}
              checked={choice.scopes.has(scope)}
              onChange={(event) => toggle(scope, checkedOf(event))}
            />
            <label for={`scope-${scope}`}>
              <code>{scope}</code> <span class="muted">{SCOPE_HELP[scope]}</span>
            </label>
          </div>
        ))}
      </fieldset>
      <div class="check">
        <input
          type="checkbox"
          id="append-only"
          name="appendOnly"
          checked={choice.appendOnly}
          onChange={(event) => edit({ appendOnly: checkedOf(event) })}
        />
        <label for="append-only">
          Append-only <span class="muted">{APPEND_ONLY_HELP}</span>
        </label>
      </div>
      <label for="expiry">Expires after</label>
      <ExpirySelect id="expiry" value={choice.expiry} onValue={(expiry) => edit({ expiry })} />
      <button type="submit" disabled={choice.scopes.size === 0}>
        Create key
      </button>
      {choice.scopes.size === 0 && <p class="help">Choose at least one permission.</p>}
    </form>
  );
}

/** The form, or the key it made; `setError` is the page's alert, `onCreated` reloads the page's list. */
export function CreateKey({ setError, onCreated }: { setError: (error: string | null) => void; onCreated: () => Promise<void> }) {
  const [choice, setChoice] = useState<KeyChoice>({ label: '', scopes: new Set(['backups:read']), appendOnly: false, expiry: '30' });
  const [created, setCreated] = useState<CreatedKey | null>(null);
  // A key that can open the console (all three permissions, not append-only) needs a fresh sign-in.
  const fresh = useFreshAction();
  const create = async (event: Event) => {
    event.preventDefault();
    setError(null);
    const label = choice.label.trim();
    const labelProblem = label === '' ? null : keyLabelProblem(label);
    if (labelProblem !== null) {
      setError(`No key was made: ${labelProblem}.`);
      return;
    }
    const request = {
      scopes: SCOPES.filter((scope) => choice.scopes.has(scope)),
      expiresInDays: expiresInDays(choice.expiry),
      appendOnly: choice.appendOnly,
      ...(label === '' ? {} : { label }),
    };
    try {
      await fresh.attempt('make a key that can open the console', async () => {
        setCreated(await api('POST /console/api/keys', { body: request }));
        setChoice((now) => ({ ...now, label: '' }));
        await onCreated();
      });
    } catch (caught) {
      setError(caughtAdvice(caught));
    }
  };
  return (
    <>
      {fresh.prompt}
      {created ? (
        <NewKey created={created} onDone={() => setCreated(null)} />
      ) : (
        <KeyForm choice={choice} edit={(change) => setChoice((now) => ({ ...now, ...change }))} submit={create} />
      )}
    </>
  );
}
