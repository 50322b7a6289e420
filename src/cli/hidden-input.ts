/**
 * Hidden input (the passphrase prompt): a small line editor over Node's keypress events (readline's key decoder),
 * nothing echoed. Editing keys edit the line as a visible prompt would (←/→, Home/End, Ctrl-A/E/B/F, Backspace,
 * Delete, Ctrl-U/K/W), so `ab ← c Home Enter` gives `acb`; every other key and escape sequence (↑/↓, F-keys,
 * Alt-…, unknown sequences) is ignored, never stored as text. A bracketed paste (ESC[200~ … ESC[201~, turned on
 * while the prompt waits) inserts the pasted text without its line breaks. docs/client.md#passphrases.
 */
import readline from 'node:readline';

/** A code point that is text: not a C0/C1 control character, not DEL. */
// eslint-disable-next-line no-control-regex
const isText = (ch: string) => ch !== '' && !/[\u0000-\u001f\u007f-\u009f]/u.test(ch);

export interface KeyPress {
  name?: string;
  sequence?: string;
  ctrl?: boolean;
  meta?: boolean;
}

export type EditResult = 'continue' | 'submit' | 'cancel';

/** The line being edited: code points and a cursor. Pure, so the keys' meaning is tested on its own too. */
export class HiddenLine {
  private chars: string[] = [];
  private cursor = 0;
  private pasting = false;

  get value(): string {
    return this.chars.join('');
  }

  private insert(text: string): void {
    const add = Array.from(text).filter(isText);
    this.chars.splice(this.cursor, 0, ...add);
    this.cursor += add.length;
  }

  /** One keypress as readline's decoder reports it (`ch` is the text, undefined for an escape sequence). */
  key(ch: string | undefined, key: KeyPress | undefined): EditResult {
    const name = key?.name;
    if (name === 'paste-start') {
      this.pasting = true;
      return 'continue';
    }
    if (name === 'paste-end') {
      this.pasting = false;
      return 'continue';
    }
    if (this.pasting) {
      // Pasted text is text, line breaks and all control characters left out; a paste never submits.
      if (typeof ch === 'string') this.insert(ch);
      return 'continue';
    }
    if (key?.ctrl && !key.meta) {
      switch (name) {
        case 'c':
          return 'cancel';
        case 'd':
          if (this.chars.length === 0) return 'cancel';
          this.chars.splice(this.cursor, 1);
          return 'continue';
        case 'a':
          this.cursor = 0;
          return 'continue';
        case 'e':
          this.cursor = this.chars.length;
          return 'continue';
        case 'b':
          this.cursor = Math.max(0, this.cursor - 1);
          return 'continue';
        case 'f':
          this.cursor = Math.min(this.chars.length, this.cursor + 1);
          return 'continue';
        case 'h':
          return this.key(undefined, { name: 'backspace' });
        case 'u':
          this.chars.splice(0, this.cursor);
          this.cursor = 0;
          return 'continue';
        case 'k':
          this.chars.splice(this.cursor);
          return 'continue';
        case 'w': {
          let start = this.cursor;
          while (start > 0 && this.chars[start - 1] === ' ') start--;
          while (start > 0 && this.chars[start - 1] !== ' ') start--;
          this.chars.splice(start, this.cursor - start);
          this.cursor = start;
          return 'continue';
        }
        case 'm':
        case 'j':
          return 'submit';
        default:
          return 'continue';
      }
    }
    if (key?.meta) return 'continue';
    switch (name) {
      case 'return':
      case 'enter':
        return 'submit';
      case 'backspace':
        if (this.cursor > 0) this.chars.splice(--this.cursor, 1);
        return 'continue';
      case 'delete':
        this.chars.splice(this.cursor, 1);
        return 'continue';
      case 'left':
        this.cursor = Math.max(0, this.cursor - 1);
        return 'continue';
      case 'right':
        this.cursor = Math.min(this.chars.length, this.cursor + 1);
        return 'continue';
      case 'home':
        this.cursor = 0;
        return 'continue';
      case 'end':
        this.cursor = this.chars.length;
        return 'continue';
      default:
        // Text typed: one code point (readline's decoder reports them one by one). Anything else is a key.
        if (typeof ch === 'string' && Array.from(ch).length === 1 && isText(ch)) this.insert(ch);
        return 'continue';
    }
  }
}

const PASTE_ON = '\x1b[?2004h';
const PASTE_OFF = '\x1b[?2004l';

/**
 * Reads one hidden line from the terminal on stdin (raw mode, keypress events), the question on stderr. Resolves
 * with the line; rejects with `cancelled()` on Ctrl-C (or Ctrl-D on an empty line), or the signal's reason.
 */
export function readHiddenLine(question: string, cancelled: () => Error, signal?: AbortSignal): Promise<string> {
  const input = process.stdin;
  const output = process.stderr;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const line = new HiddenLine();
    const paste = output.isTTY === true;
    const finish = (error?: Error) => {
      signal?.removeEventListener('abort', onAbort);
      input.off('keypress', onKey);
      input.setRawMode(false);
      input.pause();
      output.write(`${paste ? PASTE_OFF : ''}\n`);
      if (error) reject(error);
      else resolve(line.value);
    };
    const onAbort = () => finish(signal?.reason as Error);
    const onKey = (ch: string | undefined, key: KeyPress | undefined) => {
      const result = line.key(ch, key);
      if (result === 'submit') finish();
      else if (result === 'cancel') finish(cancelled());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    readline.emitKeypressEvents(input);
    output.write(`${paste ? PASTE_ON : ''}${question}`);
    input.setRawMode(true);
    input.on('keypress', onKey);
    input.resume();
  });
}
