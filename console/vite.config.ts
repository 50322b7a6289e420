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
    rollupOptions: {
      input: { main: path.join(here, 'index.html'), admin: path.join(here, 'admin.html') },
      // @scure/base's index.js opens with a line comment that quotes `/* @__PURE__ */` as an example; Rollup reads
      // the quote as a misplaced annotation and warns once per bundle (page and workers), then drops the comment.
      // Nothing in the output changes, and the file is the dependency's: that one warning is left out, no other.
      onwarn(warning, warn) {
        if (warning.code === 'INVALID_ANNOTATION' && /node_modules[\\/]@scure[\\/]base[\\/]/.test(warning.id ?? '')) return;
        warn(warning);
      },
    },
  },
  // `npx vite --config console/vite.config.ts` serves the page with hot reload against a running Coffer.
  server: {
    proxy: Object.fromEntries(['/api', '/console/api', '/admin/api', '/downloads'].map((prefix) => [prefix, { target: server }])),
  },
});
