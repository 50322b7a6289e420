/* global document, location, URLSearchParams */
/**
 * The page's script: backs up the chosen file with only the vault's recipient (a write-only session of
 * coffer-sdk's browser entry). Bundled by `npm run build` into public/page.js.
 */
import { connect } from 'coffer-sdk';

const HOSTAPP_VERSION = 'example-web-recipient/1.0.0';
const field = (id) => document.getElementById(id);

/** The server URL, API key and recipient may come in the page's query (?url=…&recipient=…) to save typing. */
function prefillFromQuery() {
  const query = new URLSearchParams(location.search);
  for (const [name, id] of [
    ['url', 'url'],
    ['recipient', 'recipient'],
  ])
    if (query.has(name)) field(id).value = query.get(name);
}

async function backUpChosenFile() {
  const file = field('file').files[0];
  const progress = field('progress');
  progress.hidden = false;
  progress.value = 0;
  const coffer = connect({ url: field('url').value.trim(), apiKey: field('api-key').value.trim() });
  const writer = coffer.writer(field('recipient').value.trim());
  const backup = await writer.backup(file, {
    hostappVersion: HOSTAPP_VERSION,
    onProgress: ({ plaintextBytes }) => (progress.value = file.size ? plaintextBytes / file.size : 1),
  });
  return backup;
}

field('backup').addEventListener('submit', async (event) => {
  event.preventDefault();
  const result = field('result');
  const submit = field('submit');
  submit.disabled = true;
  result.textContent = 'Backing up…';
  try {
    const backup = await backUpChosenFile();
    result.dataset.backupId = backup.id;
    result.textContent = `Backed up: ${backup.id} (${backup.detail.status})`;
  } catch (error) {
    result.dataset.error = error.name;
    result.textContent = `Backup failed: ${error.message}`;
  } finally {
    submit.disabled = false;
  }
});

prefillFromQuery();
