/** Builds the console (Preact + TypeScript) into dist/console-ui, served by Coffer under /console. */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));
const server = process.env.COFFER_URL ?? 'http://localhost:8080';

export default defineConfig({
  root: here,
  base: '/console/',
  publicDir: path.join(here, 'public'),
  logLevel: 'warn',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  worker: { format: 'es' },
  build: {
    outDir: path.resolve(here, '../dist/console-ui'),
    emptyOutDir: true,
    target: 'es2022',
    // libsodium (WebAssembly inside) plus X-Wing (recipients) is one ~0.6 MB chunk, loaded only by the restore worker
    // and the self-test.
    chunkSizeWarningLimit: 1024,
    reportCompressedSize: false,
    // Two pages: the owners' console (index.html, /console) and the operator console (admin.html, served at /admin).
    rollupOptions: { input: { main: path.join(here, 'index.html'), admin: path.join(here, 'admin.html') } },
  },
  // `npx vite --config console/vite.config.ts` serves the page with hot reload against a running Coffer.
  server: {
    proxy: Object.fromEntries(['/api', '/console/api', '/admin/api', '/downloads'].map((prefix) => [prefix, { target: server }])),
  },
});
