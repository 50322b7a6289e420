/** The progress bar of the commands that move bytes (backup, restore, ls). */
import cliProgress from 'cli-progress';
import { bytes } from './format.js';
import { endLiveLine, startLiveLine } from './output.js';

export interface Progress {
  update(value: number, total?: number): void;
  /** Shows 100 % at the current value (the total was an estimate). */
  complete(): void;
  stop(): void;
}

/** A bytes/rate/ETA bar on stderr, only when stdout is a terminal (and not --json); silent otherwise. */
export function progressBar(label: string, json: boolean): Progress {
  if (json || !process.stdout.isTTY) return { update: () => undefined, complete: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    {
      format: `${label} [{bar}] {percentage}% | {done} / {size} | {rate} | ETA {eta_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      etaBuffer: 64,
      fps: 8,
    },
    cliProgress.Presets.shades_classic,
  );
  const started = Date.now();
  let running = false;
  let lastTotal = 0;
  let lastValue = 0;
  // A message written meanwhile (output.ts writeHuman) ends the bar first; the next update draws it again below.
  const live = {
    stop() {
      endLiveLine(live);
      if (running) bar.stop();
      running = false;
    },
  };
  return {
    update(value, total) {
      const size = total !== undefined && Number.isFinite(total) ? Math.max(total, value) : Math.max(lastTotal, value);
      const seconds = (Date.now() - started) / 1000;
      const payload = { done: bytes(value), size: bytes(size), rate: seconds > 0 ? `${bytes(value / seconds)}/s` : '-' };
      if (!running) {
        if (!startLiveLine(live)) return;
        bar.start(size, value, payload);
        running = true;
      } else if (size !== lastTotal) bar.setTotal(size);
      lastTotal = size;
      lastValue = value;
      bar.update(value, payload);
    },
    complete() {
      if (!running) return;
      bar.setTotal(lastValue);
      lastTotal = lastValue;
      bar.update(lastValue);
    },
    stop: () => live.stop(),
  };
}
