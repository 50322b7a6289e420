/** Shared CLI plumbing: exit codes (CONTRACT §10) and output in human or --json form. */
export const EXIT = { ok: 0, failure: 1, usage: 2, cadence: 3, integrity: 4 } as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.usage);

export function emit(json: boolean, value: object, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human()}\n`);
}
