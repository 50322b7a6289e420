import js from '@eslint/js';
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

/**
 * The layers of src/ (README "Layout"), top to bottom: a folder imports only from the rows below its own, so
 * the arrows run one way. `config` is src/config.ts with the two files it is made of (config-settings.ts, config-readers.ts). `contract` is the wire contract (TypeBox schemas, body types,
 * the views that build bodies): every layer, the client and the console page may import it, and it imports only
 * domain/ (and TypeBox). The client stands apart: packed alone as the CLI package, it shares only the domain and
 * the contract with the server. It is the SDK (the coffer-sdk package, scripts/pack-sdk.mjs): the CLI-only modules
 * (agent, profiles, schedule, hooks) live in src/cli/, and nothing in src/client/ may import them. Dynamic `import()` is not checked by the rule; it follows the same arrows (cli/ and
 * server/ use it).
 *
 * `lib` (the bottom row) holds the few helpers that touch Node itself (package.json, node:crypto): every server-side
 * layer and the client may use it, it imports nothing of ours, and domain/, contract/ and config.ts may not import
 * it. Neither may the console page (console/src), which runs in the browser.
 */
const ROWS = [
  ['cli'],
  ['server'],
  ['api', 'console', 'discovery', 'ops'],
  ['http'],
  ['services'],
  ['events'],
  ['store', 'blobs'],
  ['contract'],
  ['domain', 'config'],
  ['lib'],
];
// Each folder with the folders it may import: the rows below its own.
const LAYERS = Object.fromEntries(ROWS.flatMap((row, i) => row.map((folder) => [folder, ROWS.slice(i + 1).flat()])));
LAYERS.domain = []; // pure: not even lib/
LAYERS.contract = ['domain']; // shared with the browser: no config, no lib/
LAYERS.client = ['contract', 'domain', 'lib'];
LAYERS.services = LAYERS.services.filter((folder) => folder !== 'contract'); // the domain's types, never the wire's
delete LAYERS.config; // a file, with its own rule below
const FOLDERS = Object.keys(LAYERS);

/** `../x/*`, `../../x/*`, `../../../x/*`: a folder's imports of x from any depth below src/ (e.g. src/client/web/). */
function fromAnyDepth(target) {
  return ['../', '../../', '../../../'].map((up) => `${up}${target}`);
}

function layerRule(folder, allowed) {
  const message = `src/${folder}/ may import only from ${allowed.length ? allowed.join(', ') : 'itself'} (layers: README "Layout").`;
  const forbidden = FOLDERS.filter((other) => other !== folder && !allowed.includes(other)).flatMap((other) => fromAnyDepth(`${other}/*`));
  if (!allowed.includes('config')) forbidden.push(...['config.js', 'config-settings.js', 'config-readers.js'].flatMap(fromAnyDepth));
  return {
    files: [`src/${folder}/**/*.ts`],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group: forbidden, message }] }] },
  };
}

/**
 * The services (src/services/) reach persistence through its ports only (src/store/ports/: never the SQL stores, the
 * cache or `open`), and each service file through the ports it names: SERVICE_PORTS
 * maps each file to the ports (keys of `Stores`) it may take, as `Pick<Stores, …>` and as imports of their modules
 * (ports/stores.ts, the type of them all, is for the Pick). A new service file needs its entry; only services.ts (the
 * `Services` type) holds every port.
 */
const SERVICE_PORTS = {
  'attestations.ts': ['attestations', 'accounts'],
  'audit.ts': ['audit'],
  'backups.ts': ['backups', 'accounts'],
  'binary-fields.ts': [],
  'blob-host.ts': ['multipart', 'settings'],
  'byte-limit.ts': [],
  'keys.ts': ['database', 'accounts', 'usage', 'keys', 'vaults', 'audit'],
  'operator.ts': ['accounts', 'usage', 'keys'],
  'presigned-upload.ts': ['multipart'],
  'quotas.ts': ['accounts', 'usage'],
  'read-policy.ts': ['accounts', 'vaults', 'backups'],
  'retention.ts': ['backups', 'accounts'],
  'services.ts': '*',
  'sessions.ts': ['accounts', 'keys', 'sessions', 'operatorSessions', 'signIns'],
  'sweeper.ts': ['database', 'backups', 'multipart'],
  'upload-handshake.ts': [],
  'usage.ts': ['usage'],
  'vault.ts': ['vaults', 'accounts', 'backups'],
};
/** Each port (a key of `Stores`) and its module in src/store/ports/. */
const PORT_MODULES = {
  database: 'database',
  accounts: 'accounts',
  usage: 'usage',
  keys: 'keys',
  sessions: 'sessions',
  operatorSessions: 'operator-sessions',
  signIns: 'sign-ins',
  vaults: 'vaults',
  backups: 'backups',
  audit: 'audit',
  settings: 'settings',
  multipart: 'multipart',
  attestations: 'attestations',
};
const servicePortsRule = {
  meta: { type: 'problem', schema: [] },
  create(context) {
    const file = (context.filename ?? context.getFilename()).replace(/\\/g, '/').split('/src/services/')[1];
    const allowed = file === undefined ? '*' : SERVICE_PORTS[file];
    if (allowed === '*') return {};
    const ports = allowed ?? [];
    const modules = new Set(['stores', ...ports.map((port) => PORT_MODULES[port])]);
    const named = `src/services/${file} names the ports ${ports.length ? ports.join(', ') : '(none)'} (SERVICE_PORTS in eslint.config.js)`;
    const checkSource = (node) => {
      const source = node.source && typeof node.source.value === 'string' ? node.source.value : undefined;
      const module = source && /(?:^|\/)store\/ports\/([\w-]+)\.js$/.exec(source)?.[1];
      if (module && !modules.has(module)) context.report({ node, message: `${named}: it may not import store/ports/${module}.js.` });
    };
    return {
      Program(node) {
        if (allowed === undefined)
          context.report({ node, message: `src/services/${file} has no entry in SERVICE_PORTS (eslint.config.js).` });
      },
      ImportDeclaration: checkSource,
      ExportNamedDeclaration: checkSource,
      ExportAllDeclaration: checkSource,
      ImportExpression: checkSource,
      TSTypeReference(node) {
        if (node.typeName.type !== 'Identifier' || node.typeName.name !== 'Stores') return;
        const pick = node.parent?.parent;
        const inPick = pick?.type === 'TSTypeReference' && pick.typeName.type === 'Identifier' && pick.typeName.name === 'Pick';
        const args = inPick ? (pick.typeArguments ?? pick.typeParameters).params : [];
        if (!inPick || args[0] !== node) {
          context.report({ node, message: `${named}: take them as Pick<Stores, …>, not every port.` });
          return;
        }
        const keys = args[1]?.type === 'TSUnionType' ? args[1].types : [args[1]];
        for (const key of keys) {
          const name = key?.type === 'TSLiteralType' ? key.literal.value : undefined;
          if (typeof name !== 'string' || !ports.includes(name)) {
            context.report({ node: key ?? node, message: `${named}: not ${typeof name === 'string' ? `'${name}'` : 'this'}.` });
          }
        }
      },
    };
  },
};

/** The services' layer rule, with persistence through src/store/ports/ only (flat config replaces a rule's options). */
const servicesLayerRule = (() => {
  const layer = layerRule('services', LAYERS.services);
  const [, options] = layer.rules['@typescript-eslint/no-restricted-imports'];
  const ports = {
    group: fromAnyDepth('store/*').flatMap((modules) => [modules, `!${modules.replace('*', 'ports')}`]),
    message: 'src/services/ reaches persistence through its ports only: src/store/ports/ (never sql/, cached-store or open).',
  };
  return {
    files: layer.files,
    plugins: { coffer: { rules: { 'service-ports': servicePortsRule } } },
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [...options.patterns, ports] }],
      'coffer/service-ports': 'error',
    },
  };
})();

/**
 * The SDK's browser side (src/client/browser.ts, the entry bundlers pick by the `browser` condition, and what it
 * imports: src/client/web/, src/client/app/) runs where Node does not: no Node built-in, by `node:` or bare name.
 */
const NODE_BUILTINS = builtinModules.filter((name) => !name.startsWith('_') && !name.startsWith('node:'));
const browserSdkRule = {
  files: ['src/client/browser.ts', 'src/client/web/**/*.ts', 'src/client/app/**/*.ts'],
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            group: ['node:*', ...NODE_BUILTINS.flatMap((name) => [name, `${name}/*`])],
            message: "The SDK's browser entry (src/client/browser.ts, web/, app/) runs in browsers: no Node built-in.",
          },
          // Flat config replaces a rule's options per file: the client's layer patterns are restated here.
          ...layerRule('client', LAYERS.client).rules['@typescript-eslint/no-restricted-imports'][1].patterns,
        ],
      },
    ],
  },
};

/**
 * The CLI is built on the SDK's public surface (src/client/index.ts, what coffer-sdk's Node entry exports), not on its
 * modules: no private way in, so every CLI test exercises what applications get.
 */
const cliOnSdkRule = {
  files: ['src/cli/**/*.ts'],
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            group: fromAnyDepth('client/*').flatMap((modules) => [modules, `!${modules.replace('*', 'index.js')}`]),
            message: "The CLI imports the SDK through its entry only (src/client/index.ts: coffer-sdk's public surface).",
          },
        ],
      },
    ],
  },
};

export default tseslint.config(
  { ignores: ['dist/', 'data/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  ...Object.entries(LAYERS)
    .filter(([folder]) => folder !== 'cli' && folder !== 'services') // the top imports anything, the client too
    .map(([folder, allowed]) => layerRule(folder, allowed)),
  servicesLayerRule,
  browserSdkRule,
  cliOnSdkRule,
  {
    files: ['console/src/**/*.{ts,tsx}'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/src/lib/*'], message: 'The console page runs in the browser: no src/lib/ (Node) in its bundle.' }] },
      ],
    },
  },
  {
    // README.md#configuration: src/config.ts is the only reader of the environment; everything else is handed it.
    files: ['src/**/*.ts'],
    ignores: ['src/config.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Read the environment in src/config.ts and pass the value down (README.md#configuration).',
        },
      ],
    },
  },
  {
    files: ['src/config.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['./*/*', '!./domain/*'], message: 'src/config.ts imports only domain/ from src/ (layers: README "Layout").' },
          ],
        },
      ],
    },
  },
);
