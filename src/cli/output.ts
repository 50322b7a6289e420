/** Shared CLI plumbing: exit codes (docs/client.md#exit-codes) and output in human or --json form. */
export const EXIT = { ok: 0, failure: 1, usage: 2, cadence: 3, integrity: 4, interrupted: 130 } as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.usage);

/**
 * C0 controls (except tab and newline), DEL, C1 controls and the bidirectional overrides/isolates: what a
 * string would need to move the cursor, recolour, retitle or reorder the user's terminal.
 */
// eslint-disable-next-line no-control-regex
const TERMINAL_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Human text made safe for a terminal: every control character is shown as a visible `\u{…}` escape. Much of
 * what the CLI prints comes from the server (versions, statuses, error messages and resolutions), and a hostile
 * server must not be able to rewrite the user's terminal with it. JSON output is left exact (JSON.stringify
 * escapes controls itself).
 */
export function terminalSafe(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (ch) => `\\u{${ch.codePointAt(0)!.toString(16)}}`);
}

/** What redraws the terminal's last line (a progress bar): it is ended before any message is written. */
export interface LiveLine {
  /** Ends the drawing (the line stays as drawn last, and the cursor goes to the next line). */
  stop(): void;
}

const liveLines = new Set<LiveLine>();
let interrupted = false;

/** Registers a live line while it draws; false when none may start (the command was interrupted). */
export function startLiveLine(line: LiveLine): boolean {
  if (interrupted) return false;
  liveLines.add(line);
  return true;
}

export function endLiveLine(line: LiveLine): void {
  liveLines.delete(line);
}

/**
 * Ends every live line, so what is written next starts on a line of its own instead of being drawn over (a bar
 * redraws several times a second). With `forGood` (an interruption) none starts again.
 */
export function endLiveLines(forGood = false): void {
  if (forGood) interrupted = true;
  for (const line of [...liveLines]) line.stop();
}

/** The one way human text reaches stdout/stderr. */
export function writeHuman(stream: NodeJS.WriteStream, text: string): void {
  endLiveLines();
  stream.write(`${terminalSafe(text)}\n`);
}

/** Human text: much of it comes from the server, so it goes through writeHuman (no terminal controls). */
export const print = (text: string): void => writeHuman(process.stdout, text);
export const note = (text: string): void => writeHuman(process.stderr, text);
export const printJson = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value)}\n`);

export function emit(json: boolean, value: object, human: () => string): void {
  if (json) process.stdout.write(`${JSON.stringify(value)}\n`);
  else writeHuman(process.stdout, human());
}
