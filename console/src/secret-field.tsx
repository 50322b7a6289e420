/** A labelled password input (passphrases, sign-in credentials): the one shape of every secret the page asks for. */
import type { Ref } from 'preact';
import { valueOf } from './ui/forms.js';

export function SecretField(props: {
  id: string;
  label: string;
  value: string;
  onValue: (value: string) => void;
  autoComplete: 'off' | 'current-password' | 'new-password';
  invalid?: boolean;
  /** The id of the element that explains an error. */
  describedBy?: string | undefined;
  required?: boolean;
  disabled?: boolean;
  inputRef?: Ref<HTMLInputElement>;
}) {
  return (
    <>
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        ref={props.inputRef}
        type="password"
        autoComplete={props.autoComplete}
        spellcheck={false}
        value={props.value}
        onInput={(event) => props.onValue(valueOf(event))}
        aria-invalid={props.invalid ? 'true' : undefined}
        aria-describedby={props.describedBy}
        required={props.required}
        disabled={props.disabled}
      />
    </>
  );
}
