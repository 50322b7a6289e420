/** The operator console's router (ui/router.ts) under /admin, and its in-page link. */
import type { ComponentChildren } from 'preact';
import { createRouter } from '../ui/router.js';

export const { BASE, navigate, usePath } = createRouter('/admin', () => scrollTo(0, 0));

/** A link to a page of the operator console (`to` under /admin), followed inside the page. */
export function Link({ to, class: className, children }: { to: string; class?: string; children: ComponentChildren }) {
  return (
    <a
      class={className}
      href={`${BASE}${to === '/' ? '' : to}`}
      onClick={(e) => {
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}
