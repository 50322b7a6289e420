/**
 * The two HTML pages: the landing page (the documentation's sections as links) and the API reference page (Scalar
 * over /openapi.json, its bundle served by Coffer itself).
 */
import { createHash } from 'node:crypto';
import { escapeHtml } from './document-text.js';

export function landingHtml(
  name: string,
  summary: string,
  intro: string,
  sections: { title: string; links: { title: string; path: string; note: string }[] }[],
): string {
  // Relative links: the page works whichever host name it is reached by.
  const list = sections
    .map(
      (section) =>
        `<h2>${escapeHtml(section.title)}</h2>\n<ul>\n` +
        section.links.map((l) => `<li><a href=".${escapeHtml(l.path)}">${escapeHtml(l.title)}</a>: ${escapeHtml(l.note)}</li>`).join('\n') +
        '\n</ul>',
    )
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(name)}</title>
<link rel="icon" href="./logo.svg" type="image/svg+xml">
<link rel="api-catalog" href="./.well-known/api-catalog">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1f2933}a{color:#1f5fa8}</style>
</head>
<body>
<h1>${escapeHtml(name)}</h1>
<p>${escapeHtml(summary)}</p>
<p>${escapeHtml(intro)}</p>
${list}
</body>
</html>
`;
}

/** Path of the Scalar browser bundle, served by Coffer itself (no CDN). */
export const SCALAR_ASSET_PATH = '/api-docs/scalar.js';

/**
 * The API reference page: Scalar renders /openapi.json. URLs are relative to the page, so it works behind a proxy
 * and under any host name; fonts, telemetry, the hosted agent and the MCP generator are off, so the page makes no
 * request elsewhere and offers no hosted Scalar service.
 */
export function apiDocsPage(title: string): { html: string; csp: string } {
  const configuration = {
    url: './openapi.json',
    withDefaultFonts: false,
    telemetry: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    defaultOpenAllTags: true,
    showDeveloperTools: 'never',
    documentDownloadType: 'json',
  };
  const boot = `Scalar.createApiReference('#app', ${JSON.stringify(configuration)});`;
  // Only our bundle and this one inline script may run; Scalar injects its styles, and talks only to us.
  const csp = [
    "default-src 'self'",
    `script-src 'self' 'sha256-${createHash('sha256').update(boot).digest('base64')}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}: API reference</title>
<link rel="icon" href="./logo.svg" type="image/svg+xml">
</head>
<body>
<noscript>This reference needs JavaScript. The API description itself is at <a href="./openapi.json">openapi.json</a>.</noscript>
<p><a href="./docs/sdk/">SDK reference</a>: the coffer-sdk package for Node and browser applications (<a href="./downloads/coffer-sdk.tgz">coffer-sdk.tgz</a>).</p>
<div id="app"></div>
<script src=".${SCALAR_ASSET_PATH}"></script>
<script>${boot}</script>
</body>
</html>
`;
  return { html, csp };
}
