/**
 * The one state machine of every form that unlocks something with a secret typed into the page (the Keys panel, a
 * restore, a recovery with the kit): idle → busy (with the work's progress) → done with its result, or error, where a
 * wrong passphrase is told apart from every other failure by its class or by the worker's `wrongPassphrase` field.
 */
import type { ComponentChildren, Ref, RefObject } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { SecretField } from './secret-field.js';

export type UnlockState<Result, Failure, Progress> =
  | { phase: 'idle' }
  | { phase: 'busy'; progress: Progress | null }
  | { phase: 'done'; result: Result }
  | { phase: 'error'; wrongPassphrase: boolean; failure: Failure };

/** A worker's report that it failed (restore-protocol.ts), thrown as an error. */
export class WorkerFailure extends Error {
  override readonly name = 'WorkerFailure';
  constructor(readonly report: { wrongPassphrase: boolean; integrity?: boolean; message: string }) {
    super(report.message);
  }
}

/** Lets the busy status render before work that holds this thread (Argon2id) starts. */
export const letStatusRender = () => new Promise((resolve) => setTimeout(resolve, 30));

async function isWrongPassphrase(caught: unknown): Promise<boolean> {
  if (caught instanceof WorkerFailure) return caught.report.wrongPassphrase;
  // Only work in this thread throws here, and it has loaded the crypto module by now (or failed to load it).
  const crypto = await import('./crypto/envelope.js').catch(() => null);
  return crypto !== null && caught instanceof crypto.WrongPassphraseError;
}

export function useUnlock<Result, Failure, Progress = never>(options: {
  /** What the page says about a failure (it knows its own error classes). */
  describe: (caught: unknown) => Failure | Promise<Failure>;
  /** The field to focus when this error is shown; focused once the error has rendered and the form is enabled again. */
  focusOnError?: (error: { wrongPassphrase: boolean; failure: Failure }) => RefObject<HTMLElement> | null;
}) {
  const [state, setState] = useState<UnlockState<Result, Failure, Progress>>({ phase: 'idle' });

  useEffect(() => {
    if (state.phase === 'error') options.focusOnError?.(state)?.current?.focus();
  }, [state]);

  /** Runs the work: busy (its progress reports shown), then done with what it returns or error with what it throws. */
  const run = async (work: (progress: (progress: Progress) => void) => Promise<Result>) => {
    setState({ phase: 'busy', progress: null });
    try {
      const result = await work((progress) => setState({ phase: 'busy', progress }));
      setState({ phase: 'done', result });
    } catch (caught) {
      setState({ phase: 'error', wrongPassphrase: await isWrongPassphrase(caught), failure: await options.describe(caught) });
    }
  };

  /** Refuses before any work starts (what the form itself can tell, such as two passphrases that differ). */
  const refuse = (failure: Failure) => setState({ phase: 'error', wrongPassphrase: false, failure });

  return { state, busy: state.phase === 'busy', run, refuse };
}

/** The vault passphrase and its submit button: disabled while busy, marked invalid after a wrong passphrase. */
export function VaultPassphraseForm(props: {
  id: string;
  /** The id of the element that explains an error. */
  errorId: string;
  state: UnlockState<unknown, unknown, unknown>;
  passphrase: string;
  onPassphrase: (passphrase: string) => void;
  onSubmit: (event: Event) => void;
  inputRef?: Ref<HTMLInputElement>;
  /** The button's words. */
  children: ComponentChildren;
}) {
  const { state } = props;
  const busy = state.phase === 'busy';
  return (
    <form onSubmit={props.onSubmit}>
      <SecretField
        id={props.id}
        label="Vault passphrase"
        inputRef={props.inputRef}
        value={props.passphrase}
        onValue={props.onPassphrase}
        autoComplete="off"
        invalid={state.phase === 'error' && state.wrongPassphrase}
        describedBy={state.phase === 'error' ? props.errorId : undefined}
        required
        disabled={busy}
      />
      <button type="submit" disabled={busy || !props.passphrase}>
        {props.children}
      </button>
    </form>
  );
}

/** The unlock's live status while Argon2id runs, and its error: a wrong passphrase, or the page's words for another. */
export function UnlockStatus({ state, errorId }: { state: UnlockState<unknown, ComponentChildren, unknown>; errorId: string }) {
  return (
    <>
      <div aria-live="polite" role="status">
        {state.phase === 'busy' && <p>Unlocking the vault (Argon2id, this takes a moment)…</p>}
      </div>
      {state.phase === 'error' && (
        <p class="error" role="alert" id={errorId}>
          {state.wrongPassphrase ? (
            <>
              <strong>Wrong passphrase.</strong> The vault could not be unlocked with it.
            </>
          ) : (
            state.failure
          )}
        </p>
      )}
    </>
  );
}
