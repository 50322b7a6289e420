/* global URL, fetch, process */
/**
 * P2 — 50 MiB download: Coffer's GET /api/backups/{id}/content vs nginx serving the same file (target ≥ 0.8×).
 * fs backends: the target is judged on Coffer behind nginx in X-Accel-Redirect mode (a second Coffer server with
 * COFFER_ACCEL_REDIRECT, on its own data directory holding the same bytes, fronted by an nginx running
 * deploy/nginx.conf's proxy and `internal` location): Coffer authorizes, nginx sends the file. The direct Coffer
 * path is judged against a bare Node file stream (≥ 0.9×). nginx as a file server serves the very blob file the
 * accel server redirects to (a hard link to it); on S3 a copy of the same bytes. Same client (curl) for every
 * side; each round downloads `--per-round` times from each side (interleaved) and keeps the round's mean; the
 * table shows the median of the rounds.
 *
 * P2-S3, the `+ceph` backends (Ceph's RADOS Gateway, where Ceph is installed): the baseline is a straight GET of the
 * same object from the gateway (curl, a presigned URL made beforehand); Coffer is measured the way the SDK and CLI
 * fetch with the extension s3-presigned-download (GET /api/backups/{id}/content-url, then curl GETs the URL: both
 * timed together), behind nginx (COFFER_ACCEL_REDIRECT=/_coffer_s3: nginx proxies a GET presigned for the gateway,
 * deploy/nginx.conf's S3 locations), and direct (/content streamed through Node), all against one server (it trusts
 * only 127.0.0.1, nginx's address; the direct requests come from 127.0.0.2). Target: ≥ 0.8× the gateway.
 *
 *   node bench/p2-download.js [--rounds 5] [--per-round 3]
 *                             [--backends sqlite+fs,postgres+fs,sqlite+s3,postgres+s3,sqlite+ceph,postgres+ceph]
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  BENCH_DIR,
  MiB,
  cpuTimeOf,
  logFile,
  commandLine,
  list,
  log,
  median,
  options,
  requireBuild,
  round,
  startChild,
  tempDir,
  runWhenMain,
} from './lib/common.js';
import { accounts, cephInstalled, createSlot, finalize, pgAvailable, prepareBackend, startCoffer } from './lib/coffer.js';
import { curl } from './lib/curl.js';
import { accelS3Site, accelSite, startNginx } from './lib/nginx.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET = 0.8;
/** The direct path (no nginx in front) against a bare node:http file stream: what Node itself allows. */
export const NODE_TARGET = 0.9;
const ACCEL_PREFIX = '/_coffer_blobs';
const S3_ACCEL_PREFIX = '/_coffer_s3';
/** A local address that is not the trusted proxy's (127.0.0.1): Coffer streams its answer itself. */
const NOT_THE_PROXY = '127.0.0.2';

function findFiles(dir) {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/**
 * P2-S3 on one `+ceph` backend: the gateway baseline, Coffer by content-url + GET, behind nginx (accel to the
 * gateway) and direct, interleaved. `serve(env, what)` starts Coffer with one READY backup of the body.
 */
async function measureCeph({ backend, opts, size, serve, stops }) {
  const side = await serve(
    {
      COFFER_S3_PRESIGNED: 'on',
      COFFER_ACCEL_REDIRECT: S3_ACCEL_PREFIX,
      COFFER_TRUST_PROXY: '127.0.0.1',
      // Long enough for the baseline's URL to outlive the whole measurement.
      COFFER_S3_URL_LIFETIME: '2h',
    },
    'coffer-s3',
  );
  const auth = { authorization: `Bearer ${side.apiKey}` };
  const api = (what) => `${side.coffer.url}/api/backups/${side.id}/${what}`;
  // Coffer's redirect names the object in the gateway: the baseline GETs that very URL straight from it.
  const asked = await fetch(api('content'), { headers: auth });
  const target = asked.headers.get('x-accel-redirect');
  await asked.arrayBuffer();
  if (!target?.startsWith(`${S3_ACCEL_PREFIX}/`)) throw new Error(`Coffer answered ${asked.status} without an S3 X-Accel-Redirect`);
  const storeOrigin = new URL(side.storeEndpoint).origin;
  const gatewayUrl = storeOrigin + target.slice(target.indexOf('/', S3_ACCEL_PREFIX.length + 1));
  const front = await startNginx(null, { site: accelS3Site({ upstream: new URL(side.coffer.url).host, storeOrigin }) });
  stops.push(() => front.stop());

  const sides = ['gateway', 'url', 'accel', 'coffer'];
  const pids = { gateway: [], url: [side.coffer.pid], accel: [side.coffer.pid, front.workerPid ?? front.pid], coffer: [side.coffer.pid] };
  const cpu = Object.fromEntries(sides.map((who) => [who, []]));
  const cpuNow = (who) => pids[who].map(cpuTimeOf);
  const get = async (who) => {
    const cpu0 = cpuNow(who);
    let seconds;
    let result;
    if (who === 'url') {
      // As the SDK and CLI do it: the API request, then the GET of the answered URL.
      const t0 = process.hrtime.bigint();
      const answer = await fetch(api('content-url'), { headers: auth });
      const { url, size: announced } = await answer.json();
      if (answer.status !== 200 || announced !== size) throw new Error(`content-url answered ${answer.status}`);
      const apiSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
      result = await curl(url);
      seconds = apiSeconds + result.seconds;
    } else {
      result =
        who === 'gateway'
          ? await curl(gatewayUrl)
          : who === 'accel'
            ? await curl(front.url + `/api/backups/${side.id}/content`, { headers: auth })
            : await curl(api('content'), { headers: auth, from: NOT_THE_PROXY });
      seconds = result.seconds;
    }
    if (result.status !== 200 || result.bytes !== size) throw new Error(`${who} download: ${result.status}, ${result.bytes} bytes`);
    cpu[who].push(cpuNow(who).map((value, i) => value - cpu0[i]));
    return seconds;
  };
  for (const who of sides) await get(who); // warm-up
  for (const who of sides) cpu[who].length = 0;
  const samples = Object.fromEntries(sides.map((who) => [who, []]));
  for (let r = 0; r < opts.rounds; r++) {
    const times = Object.fromEntries(sides.map((who) => [who, []]));
    for (let i = 0; i < opts['per-round']; i++) {
      for (const who of (r + i) % 2 === 0 ? sides : [...sides].reverse()) times[who].push(await get(who));
    }
    for (const who of sides) samples[who].push(size / MiB / (times[who].reduce((a, b) => a + b, 0) / times[who].length));
  }
  const meanMs = (who, i = 0) => (cpu[who].reduce((sum, each) => sum + each[i], 0) / cpu[who].length) * 1000;
  const row = {
    backend,
    ceph: true,
    gateway: median(samples.gateway),
    url: median(samples.url),
    accel: median(samples.accel),
    coffer: median(samples.coffer),
    cpuMs: { url: meanMs('url'), accelCoffer: meanMs('accel', 0), accelNginx: meanMs('accel', 1), coffer: meanMs('coffer') },
    raw: { ...samples, cpuSeconds: cpu },
  };
  log(
    `P2-S3 ${backend}: gateway ${row.gateway.toFixed(0)} MiB/s, content-url + GET ${row.url.toFixed(0)} MiB/s ` +
      `(${fmtRatio(ratio(row.url, row.gateway))}), behind nginx ${row.accel.toFixed(0)} MiB/s (${fmtRatio(ratio(row.accel, row.gateway))}), ` +
      `direct ${row.coffer.toFixed(0)} MiB/s (${fmtRatio(ratio(row.coffer, row.gateway))})`,
  );
  return row;
}

export async function main() {
  const ceph = cephInstalled();
  const opts = options({
    rounds: 5,
    'per-round': 3,
    backends: `sqlite+fs,postgres+fs,sqlite+s3,postgres+s3${ceph ? ',sqlite+ceph,postgres+ceph' : ''}`,
    'size-mib': 50,
  });
  requireBuild();
  const started = Date.now();
  const size = opts['size-mib'] * MiB;
  const work = tempDir('coffer-bench-p2-');
  const bodyFile = path.join(work, 'body.bin');
  fs.writeFileSync(bodyFile, crypto.randomBytes(size));
  const root = path.join(work, 'www');
  fs.mkdirSync(root);
  const nginx = await startNginx(root);
  // Reference: what bare Node does with the same file (no sendfile), 1 MiB reads like Coffer's fs store.
  const bare = await startChild(path.join(BENCH_DIR, 'lib', 'baseline-download.js'), [path.join(root, 'blob.bin')]);
  const hasPg = await pgAvailable();
  const rows = [];
  const raw = {};
  const notes = [
    `nginx ${nginx.version}, 1 worker process, sendfile on (Debian's default).`,
    'Server CPU per download is read from /proc around each request: the scheduler run time of all threads of the serving process (/proc/<pid>/task/<tid>/schedstat, nanoseconds; nginx: its worker). Unlike throughput it hardly depends on what else the machine is doing.',
    'The reference column is a bare node:http server streaming the same file with 1 MiB reads: Node has no sendfile(2) path for HTTP responses, so it copies every byte file → user space → socket, which nginx does not.',
    `Accel column (fs only): a second Coffer server with COFFER_ACCEL_REDIRECT=${ACCEL_PREFIX} and COFFER_TRUST_PROXY=loopback (only a request through a trusted proxy gets the redirect) on its own data directory (the same 50 MiB uploaded to it), behind an nginx with deploy/nginx.conf's upstream (keepalive), proxy settings and its \`internal\` location uncommented, plain HTTP like the baseline; curl asks nginx, nginx asks Coffer, Coffer answers with the redirect and nginx sends the file with sendfile. Its CPU is Coffer's + that nginx worker's. The nginx baseline serves that very blob file.`,
    'Direct Coffer / nginx stays in the table and the summary as information (met: n/a) on fs: deployed behind nginx the ≥ 0.8× target is judged on the accel column, and the direct path (Node, no sendfile) is judged against bare Node; on S3 (no accel mode) it is still the target.',
    `P2-S3 (Ceph backends): one Coffer server with COFFER_S3_PRESIGNED=on, COFFER_ACCEL_REDIRECT=${S3_ACCEL_PREFIX} and COFFER_TRUST_PROXY=127.0.0.1 over one Ceph cluster (one monitor, one OSD on memstore, its RADOS Gateway; test/helpers/ceph.ts). Gateway baseline: curl GETs the object with a URL presigned beforehand (the one Coffer's redirect names). content-url + GET: the API request (fetch, keep-alive, as the SDK) plus curl's GET of the answered URL, timed together. Behind nginx: curl asks an nginx with deploy/nginx.conf's upstream, proxy settings and S3 locations, Coffer redirects, nginx proxies the gateway. Direct: curl from ${NOT_THE_PROXY}, Coffer streams the object through Node.`,
  ];
  if (!ceph) notes.push('P2-S3: Ceph is not installed (apt-get install ceph-mon ceph-osd radosgw ceph-common): no Ceph rows.');
  try {
    for (const backend of list(opts.backends)) {
      if (backend.startsWith('postgres') && !hasPg) {
        notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
        continue;
      }
      // Everything started for this backend, stopped in reverse order whatever happens.
      const stops = [];
      try {
        const logName = (what) => logFile(`${path.basename(import.meta.url, '.js')}-${what}-${backend}.log`);
        /** A Coffer server on its own prepared backend holding one READY backup of the body: { coffer, apiKey, id, blob }. */
        const serve = async (env, what) => {
          const prepared = await prepareBackend(backend);
          stops.push(() => prepared.cleanup());
          const coffer = await startCoffer(prepared, { env, logFile: logName(what) });
          stops.push(() => coffer.stop());
          const [account] = await accounts(coffer, 1);
          const id = await createSlot(account.call);
          const uploaded = await curl(`${coffer.url}/api/backups/upload?backupId=${id}`, {
            method: 'POST',
            upload: bodyFile,
            headers: { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/octet-stream' },
          });
          if (uploaded.status !== 201) throw new Error(`${what} upload answered ${uploaded.status}`);
          await finalize(account.call, id, size);
          const blob = prepared.blobs === 'fs' ? findFiles(path.join(prepared.dataDir, 'blobs'))[0] : null;
          return {
            coffer,
            apiKey: account.apiKey,
            id,
            blob,
            blobsDir: path.join(prepared.dataDir, 'blobs'),
            storeEndpoint: prepared.env.COFFER_S3_ENDPOINT,
          };
        };
        const content = (side) => [`/api/backups/${side.id}/content`, { headers: { authorization: `Bearer ${side.apiKey}` } }];
        if (backend.endsWith('+ceph')) {
          const row = await measureCeph({ backend, opts, size, serve, stops });
          raw[backend] = row.raw;
          rows.push(row);
          continue;
        }
        const direct = await serve({}, 'coffer');
        const accel = backend.endsWith('+fs')
          ? await serve({ COFFER_ACCEL_REDIRECT: ACCEL_PREFIX, COFFER_TRUST_PROXY: 'loopback' }, 'coffer-accel')
          : null;
        let front = null;
        if (accel) {
          // Without the setting the accel column would silently measure nginx proxying Coffer's own stream.
          const asked = await fetch(accel.coffer.url + content(accel)[0], content(accel)[1]);
          const body = await asked.arrayBuffer();
          if (!asked.headers.get('x-accel-redirect')?.startsWith(`${ACCEL_PREFIX}/`) || body.byteLength !== 0) {
            throw new Error(`accel Coffer answered ${asked.status} without an X-Accel-Redirect (or with a body)`);
          }
          front = await startNginx(null, {
            site: accelSite({ upstream: new URL(accel.coffer.url).host, blobsDir: accel.blobsDir, prefix: ACCEL_PREFIX }),
          });
          stops.push(() => front.stop());
        }
        const served = path.join(root, 'blob.bin');
        fs.rmSync(served, { force: true });
        if (accel) fs.linkSync(accel.blob, served);
        else fs.copyFileSync(bodyFile, served);
        const sides = accel ? ['coffer', 'accel', 'nginx', 'node'] : ['coffer', 'nginx', 'node'];
        const pids = { coffer: [direct.coffer.pid], nginx: [nginx.workerPid ?? nginx.pid], node: [bare.pid] };
        if (accel) pids.accel = [accel.coffer.pid, front.workerPid ?? front.pid];
        const cpu = Object.fromEntries(sides.map((who) => [who, []]));
        const cpuNow = (who) => pids[who].map(cpuTimeOf);
        const get = async (who) => {
          const cpu0 = cpuNow(who);
          const result =
            who === 'coffer'
              ? await curl(direct.coffer.url + content(direct)[0], content(direct)[1])
              : who === 'accel'
                ? await curl(front.url + content(accel)[0], content(accel)[1])
                : who === 'nginx'
                  ? await curl(`${nginx.url}/blob.bin`)
                  : await curl(`${bare.ready.url}/`);
          if (result.status !== 200 || result.bytes !== size) throw new Error(`${who} download: ${result.status}, ${result.bytes} bytes`);
          // Per process (accel: [Coffer, its nginx worker]).
          cpu[who].push(cpuNow(who).map((seconds, i) => seconds - cpu0[i]));
          return result.seconds;
        };
        for (const who of sides) await get(who); // warm-up
        for (const who of sides) cpu[who].length = 0;
        const samples = Object.fromEntries(sides.map((who) => [who, []]));
        for (let r = 0; r < opts.rounds; r++) {
          const times = Object.fromEntries(sides.map((who) => [who, []]));
          for (let i = 0; i < opts['per-round']; i++) {
            for (const who of (r + i) % 2 === 0 ? sides : [...sides].reverse()) times[who].push(await get(who));
          }
          for (const who of sides) {
            const mean = times[who].reduce((a, b) => a + b, 0) / times[who].length;
            samples[who].push(size / MiB / mean);
          }
        }
        raw[backend] = { ...samples, cpuSeconds: cpu };
        const meanMs = (who, i = 0) => (cpu[who].reduce((sum, each) => sum + each[i], 0) / cpu[who].length) * 1000;
        const row = {
          backend,
          coffer: median(samples.coffer),
          accel: accel ? median(samples.accel) : NaN,
          nginx: median(samples.nginx),
          node: median(samples.node),
          cpuMs: {
            coffer: meanMs('coffer'),
            accelCoffer: accel ? meanMs('accel', 0) : NaN,
            accelNginx: accel ? meanMs('accel', 1) : NaN,
            nginx: meanMs('nginx'),
            node: meanMs('node'),
          },
        };
        log(
          `P2 ${backend}: Coffer ${row.coffer.toFixed(0)} MiB/s, ` +
            (accel ? `accel ${row.accel.toFixed(0)} MiB/s (${fmtRatio(ratio(row.accel, row.nginx))}), ` : '') +
            `nginx ${row.nginx.toFixed(0)} MiB/s, bare node ${row.node.toFixed(0)} MiB/s (direct/node ${fmtRatio(ratio(row.coffer, row.node))})`,
        );
        rows.push(row);
      } finally {
        for (const stop of stops.reverse()) await stop().catch((error) => log(`stop failed: ${error.message}`));
      }
    }
  } finally {
    await nginx.stop();
    await bare.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const fileRows = rows.filter((row) => !row.ceph);
  const cephRows = rows.filter((row) => row.ceph);
  return writeResult({
    id: 'p2',
    name: 'p2-download',
    title: 'P2 — 50 MiB download',
    target: `≥ ${TARGET}× nginx serving the same file (fs: Coffer behind nginx in accel mode); direct path ≥ ${NODE_TARGET}× a bare Node file stream; P2-S3 (Ceph): ≥ ${TARGET}× a straight GET from the gateway`,
    command: commandLine('p2-download.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `Download throughput, ${opts['size-mib']} MiB, curl over loopback, median of ${opts.rounds} rounds × ${opts['per-round']} downloads (MiB/s)`,
        columns: [
          'backend',
          'Coffer direct',
          'Coffer behind nginx, accel mode',
          'nginx serving the file (baseline)',
          'bare node:http file stream (reference)',
          'accel / nginx',
          'direct / bare node',
          'direct / nginx',
          'bare node / nginx',
        ],
        rows: fileRows.map((row) => [
          row.backend,
          round(row.coffer, 0),
          Number.isFinite(row.accel) ? round(row.accel, 0) : '— (fs only)',
          round(row.nginx, 0),
          round(row.node, 0),
          fmtRatio(ratio(row.accel, row.nginx)),
          fmtRatio(ratio(row.coffer, row.node)),
          fmtRatio(ratio(row.coffer, row.nginx)),
          fmtRatio(ratio(row.node, row.nginx)),
        ]),
      },
      {
        title:
          "Server CPU per download (ms, all threads' run time from /proc/<pid>/task/<tid>/schedstat, mean over the measured downloads)",
        columns: [
          'backend',
          'Coffer direct',
          'accel: Coffer (authorizes, redirects)',
          'accel: its nginx worker (proxy + sendfile)',
          'nginx serving the file',
          'bare node:http',
        ],
        rows: fileRows.map((row) => [
          row.backend,
          round(row.cpuMs.coffer, 0),
          Number.isFinite(row.cpuMs.accelCoffer) ? round(row.cpuMs.accelCoffer, 1) : '—',
          Number.isFinite(row.cpuMs.accelNginx) ? round(row.cpuMs.accelNginx, 1) : '—',
          round(row.cpuMs.nginx, 0),
          round(row.cpuMs.node, 0),
        ]),
      },
      ...(cephRows.length === 0
        ? []
        : [
            {
              title: `P2-S3: download throughput from Ceph's RADOS Gateway, ${opts['size-mib']} MiB, curl over loopback, median of ${opts.rounds} rounds × ${opts['per-round']} downloads (MiB/s)`,
              columns: [
                'backend',
                'straight GET from the gateway (baseline)',
                'Coffer: content-url + GET (SDK/CLI)',
                'Coffer behind nginx (accel to the gateway)',
                'Coffer direct (through Node)',
                'content-url / gateway',
                'behind nginx / gateway',
                'direct / gateway',
              ],
              rows: cephRows.map((row) => [
                row.backend,
                round(row.gateway, 0),
                round(row.url, 0),
                round(row.accel, 0),
                round(row.coffer, 0),
                fmtRatio(ratio(row.url, row.gateway)),
                fmtRatio(ratio(row.accel, row.gateway)),
                fmtRatio(ratio(row.coffer, row.gateway)),
              ]),
            },
            {
              title: "P2-S3: Coffer's CPU per download (ms, all threads' run time from /proc, mean over the measured downloads)",
              columns: ['backend', 'content-url (the API request)', 'behind nginx: Coffer', 'behind nginx: its nginx worker', 'direct'],
              rows: cephRows.map((row) => [
                row.backend,
                round(row.cpuMs.url, 1),
                round(row.cpuMs.accelCoffer, 1),
                round(row.cpuMs.accelNginx, 1),
                round(row.cpuMs.coffer, 0),
              ]),
            },
          ]),
    ],
    verdicts: rows.flatMap((row) =>
      row.ceph
        ? [
            {
              what: `P2 ${row.backend}: download ≥ ${TARGET}× a straight GET from the gateway`,
              value: fmtRatio(ratio(row.url, row.gateway)),
              target: `≥ ${TARGET}×`,
              met: ratio(row.url, row.gateway) >= TARGET,
            },
            {
              what: `P2 ${row.backend}: download behind nginx (X-Accel-Redirect to the gateway) ≥ ${TARGET}× a straight GET from the gateway`,
              value: fmtRatio(ratio(row.accel, row.gateway)),
              target: `≥ ${TARGET}×`,
              met: ratio(row.accel, row.gateway) >= TARGET,
            },
            {
              what: `P2 ${row.backend}: direct download (through Node) vs a straight GET from the gateway (information)`,
              value: fmtRatio(ratio(row.coffer, row.gateway)),
              target: 'n/a',
              met: null,
            },
          ]
        : row.backend.endsWith('+fs')
          ? [
              {
                what: `P2 ${row.backend}: Coffer behind nginx (X-Accel-Redirect) ≥ ${TARGET}× nginx serving the same file`,
                value: fmtRatio(ratio(row.accel, row.nginx)),
                target: `≥ ${TARGET}×`,
                met: ratio(row.accel, row.nginx) >= TARGET,
              },
              {
                what: `P2 ${row.backend}: direct download ≥ ${NODE_TARGET}× a bare Node file stream (Node has no sendfile)`,
                value: fmtRatio(ratio(row.coffer, row.node)),
                target: `≥ ${NODE_TARGET}×`,
                met: ratio(row.coffer, row.node) >= NODE_TARGET,
              },
              {
                what: `P2 ${row.backend}: direct download vs nginx (information; the target is judged on accel mode)`,
                value: fmtRatio(ratio(row.coffer, row.nginx)),
                target: `≥ ${TARGET}× behind nginx`,
                met: null,
              },
            ]
          : [
              {
                what: `P2 ${row.backend}: download ≥ ${TARGET}× nginx`,
                value: fmtRatio(ratio(row.coffer, row.nginx)),
                target: `≥ ${TARGET}×`,
                met: ratio(row.coffer, row.nginx) >= TARGET,
              },
            ],
    ),
    notes,
    chart: {
      title: 'P2 — 50 MiB download throughput (higher is better)',
      subtitle: `median of ${opts.rounds} rounds; note = accel / nginx (fs), Coffer / nginx (S3)`,
      unit: 'MiB/s',
      series: ['Coffer', 'Coffer via nginx accel', 'nginx', 'bare node:http'],
      groups: fileRows.map((row) => ({
        label: row.backend,
        note: fmtRatio(Number.isFinite(row.accel) ? ratio(row.accel, row.nginx) : ratio(row.coffer, row.nginx)),
        values: [row.coffer, row.accel, row.nginx, row.node],
      })),
    },
    raw,
  });
}

runWhenMain(import.meta.url, main);
