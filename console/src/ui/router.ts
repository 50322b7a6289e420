/**
 * The one history router of both consoles (the owner's under /console, the operator's under /admin): links are real
 * URLs (reload and share work), clicks stay in the page. Each console makes its own with `createRouter`; paths are
 * relative to its base ("/" is the base itself).
 */
import { useEffect, useState } from 'preact/hooks';

export interface Router {
  /** The console's base path ("/console"). */
  BASE: string;
  /** The path under the base, "/" for the base itself. */
  currentPath(): string;
  navigate(path: string, options?: { replace?: boolean }): void;
  /** The current path, re-rendering on every navigation and on the browser's back and forward. */
  usePath(): string;
  /** Same-origin links under the base are followed inside the page (modifier clicks open tabs as usual). */
  interceptLinks(root: HTMLElement): void;
}

/** A router under `base`; `afterNavigate` runs after each in-page navigation (where focus or scroll goes). */
export function createRouter(base: string, afterNavigate: () => void): Router {
  const listeners = new Set<() => void>();

  function currentPath(): string {
    const path = location.pathname.startsWith(base) ? location.pathname.slice(base.length) : location.pathname;
    return path === '' ? '/' : path;
  }

  function navigate(path: string, options: { replace?: boolean } = {}): void {
    const url = `${base}${path === '/' ? '' : path}`;
    if (options.replace) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
    for (const listener of listeners) listener();
    afterNavigate();
  }

  function usePath(): string {
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

  function interceptLinks(root: HTMLElement): void {
    root.addEventListener('click', (event) => {
      if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      const anchor = (event.target as Element).closest('a');
      if (!anchor || anchor.target || anchor.hasAttribute('download')) return;
      const url = new URL(anchor.href, location.href);
      if (url.origin !== location.origin || !url.pathname.startsWith(base)) return;
      event.preventDefault();
      navigate(url.pathname.slice(base.length) || '/');
    });
  }

  return { BASE: base, currentPath, navigate, usePath, interceptLinks };
}
