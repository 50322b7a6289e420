/**
 * The one way both consoles confirm an action that cannot be undone (revoking a key, deleting a backup for good, …):
 * the first button only asks, saying what will happen; the action runs from the second; "Cancel"-like keeps all as
 * it was. Focus moves to the keeping button, so an accidental Enter or double click never confirms.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

export interface ConfirmActionProps {
  /** The first button's text ("Revoke…"). */
  ask: string;
  /** Its accessible name when the text alone is ambiguous in a list ("Revoke key 1a2b3c4d"). */
  askLabel?: string;
  /** The confirming button's text ("Revoke now"). */
  confirm: string;
  /** The keeping button's text. */
  keep?: string;
  /** What cannot be undone, shown while asking. */
  consequence?: ComponentChildren;
  /** The accessible name of the question ("Confirm revoking key 1a2b3c4d"). */
  question: string;
  /** Style of the first button: a list's row action is secondary, a page's danger zone danger. */
  askClass?: 'danger' | 'secondary';
  onConfirm: () => unknown;
}

export function ConfirmAction({
  ask,
  askLabel,
  confirm,
  keep = 'Cancel',
  consequence,
  question,
  askClass = 'secondary',
  onConfirm,
}: ConfirmActionProps) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const keepButton = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) keepButton.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" class={askClass} aria-label={askLabel} onClick={() => setAsking(true)}>
        {ask}
      </button>
    );
  }
  const run = async () => {
    setBusy(true);
    try {
      await onConfirm();
    } finally {
      setBusy(false);
      setAsking(false);
    }
  };
  return (
    <span class="confirm" role="group" aria-label={question}>
      {consequence && <span class="confirm-consequence">{consequence}</span>}
      <button type="button" class="danger" disabled={busy} onClick={() => void run()}>
        {confirm}
      </button>
      <button type="button" class="secondary" ref={keepButton} disabled={busy} onClick={() => setAsking(false)}>
        {keep}
      </button>
    </span>
  );
}
