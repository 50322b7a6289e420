/** A tiny history router under /console: links are real URLs (reload and share work), clicks stay in the page. */
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';

export function currentPath(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return path === '' ? '/' : path;
}

const listeners = new Set<() => void>();

export function navigate(path: string, options: { replace?: boolean } = {}): void {
  const url = `${BASE}${path === '/' ? '' : path}`;
  if (options.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const listener of listeners) listener();
  // Move focus to the new page's heading, as a full page load would for a screen reader user.
  queueMicrotask(() => document.querySelector<HTMLElement>('main h1')?.focus());
}

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

export function usePath(): string {
  const [path, setPath] = useState(currentPath);
  useEffect(() => {
    const update = () => setPath(currentPath());
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return path;
}

/** Same-origin /console links are followed inside the page (modifier clicks open tabs as usual). */
export function interceptLinks(root: HTMLElement): void {
  root.addEventListener('click', (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const anchor = (event.target as Element).closest('a');
    if (!anchor || anchor.target || anchor.hasAttribute('download')) return;
    const url = new URL(anchor.href, location.href);
    if (url.origin !== location.origin || !url.pathname.startsWith(BASE)) return;
    event.preventDefault();
    navigate(url.pathname.slice(BASE.length) || '/');
  });
}
