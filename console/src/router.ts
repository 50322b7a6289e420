/** The owner console's router (ui/router.ts) under /console, and the message one page leaves for the next. */
import { createRouter } from './ui/router.js';

export const { BASE, currentPath, navigate, usePath, interceptLinks } = createRouter('/console', () =>
  // Move focus to the new page's heading, as a full page load would for a screen reader user.
  queueMicrotask(() => document.querySelector<HTMLElement>('main h1')?.focus()),
);

let flash: string | null = null;

/** A message for the next page to show once (what an action that left the page did). */
export function setFlash(message: string): void {
  flash = message;
}

/** The message left by the previous page, taken once. */
export function takeFlash(): string | null {
  const message = flash;
  flash = null;
  return message;
}
