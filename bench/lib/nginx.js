/* global process, fetch */
/**
 * The P2 baseline: Debian nginx (nginx-light, installed with apt-get when missing) serving one directory on a
 * loopback port, with its own prefix, config, pid and logs in a temp directory — never the system config.
 * One worker process (Coffer is one Node process), Debian's defaults otherwise (sendfile on, tcp_nopush on).
 * Run as root (as here), the worker stays root so it can read the private temp directories.
 * startNginx(null, { site: accelSite(…) }) runs the same nginx as the documented front of a Coffer server in
 * X-Accel-Redirect mode instead of a file server.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ROOT, ensureDebian, sleep, tempDir } from './common.js';

/**
 * The http{} part of Coffer behind nginx with COFFER_ACCEL_REDIRECT=<prefix>, over plain HTTP (the file-server
 * baseline has no TLS either): deploy/nginx.conf's upstream, proxy settings and `location /`, and its commented
 * `internal` location taken from the file itself (uncommented, alias pointed at `blobsDir`), so the bench measures
 * what the documentation ships. Returns { http, server } for startNginx's `site`.
 */
export function accelSite({ upstream, blobsDir, prefix = '/_coffer_blobs' }) {
  const doc = fs.readFileSync(path.join(ROOT, 'deploy', 'nginx.conf'), 'utf8');
  const block = /^ {2}#location \/_coffer_blobs\/ \{\n(?: {2}#.*\n)*? {2}#\}\n/m.exec(doc);
  if (!block) throw new Error('deploy/nginx.conf: the commented `location /_coffer_blobs/` block was not found');
  const alias = '/var/lib/coffer/blobs/;';
  if (!block[0].includes(alias)) throw new Error(`deploy/nginx.conf: the internal location has no \`alias ${alias}\``);
  const internal = block[0]
    .replace(/^ {2}#/gm, '    ')
    .replace('location /_coffer_blobs/', `location ${prefix}/`)
    .replace(alias, `${blobsDir.replace(/\/$/, '')}/;`);
  return {
    http: `upstream coffer {\n    server ${upstream};\n    keepalive 64;\n  }`,
    server: `client_max_body_size 51m;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
${internal}    location / {
      proxy_pass http://coffer;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
    }`,
  };
}

/**
 * The same for the S3 store (COFFER_ACCEL_REDIRECT=/_coffer_s3): deploy/nginx.conf's commented S3 locations
 * (uncommented, proxy_pass pointed at `storeOrigin`, the gateway as Coffer reaches it).
 */
export function accelS3Site({ upstream, storeOrigin }) {
  const doc = fs.readFileSync(path.join(ROOT, 'deploy', 'nginx.conf'), 'utf8');
  const block =
    /^ {2}#location ~ \^\/_coffer_s3\/.*\n(?: {2}#.*\n)*? {2}#\}\n {2}#location @coffer_s3_failed \{\n(?: {2}#.*\n)*? {2}#\}\n/m.exec(doc);
  if (!block) throw new Error('deploy/nginx.conf: the commented `location ~ ^/_coffer_s3/` blocks were not found');
  const proxy = 'proxy_pass http://127.0.0.1:7480$coffer_object';
  if (!block[0].includes(proxy)) throw new Error(`deploy/nginx.conf: the S3 location has no \`${proxy}\``);
  const internal = block[0].replace(/^ {2}#/gm, '    ').replace(proxy, `proxy_pass ${storeOrigin}$coffer_object`);
  const front = accelSite({ upstream, blobsDir: '/nonexistent' });
  // The fs site's front (upstream, proxy settings, location /) with the S3 locations instead of the fs one.
  return { http: front.http, server: front.server.replace(/ {4}location \/_coffer_blobs\/ \{\n(?: {4}.*\n)*? {4}\}\n/, internal) };
}

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `root`: the directory served at /; or `site`: { http, server } (the server block's body), e.g. accelSite(). */
export async function startNginx(root, { site } = {}) {
  ensureDebian('nginx', 'nginx-light');
  const prefix = tempDir('coffer-bench-nginx-');
  const port = await freePort();
  const conf = path.join(prefix, 'nginx.conf');
  const temp = (name) => path.join(prefix, name);
  fs.writeFileSync(
    conf,
    `daemon off;
${process.getuid?.() === 0 ? 'user root;\n' : ''}worker_processes 1;
pid ${temp('nginx.pid')};
error_log ${temp('error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  default_type application/octet-stream;
  client_body_temp_path ${temp('body')};
  proxy_temp_path ${temp('proxy')};
  fastcgi_temp_path ${temp('fastcgi')};
  uwsgi_temp_path ${temp('uwsgi')};
  scgi_temp_path ${temp('scgi')};
  ${site?.http ?? ''}
  server {
    listen 127.0.0.1:${port};
    ${site?.server ?? `root ${root};\n    location / { }`}
  }
}
`,
  );
  const child = spawn('nginx', ['-p', prefix, '-c', conf, '-e', temp('error.log')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
    const up = await fetch(url).then(
      () => true,
      () => false,
    );
    if (up) break;
    await sleep(50);
  }
  const version = (
    await new Promise((resolve) => {
      const v = spawn('nginx', ['-v'], { stdio: ['ignore', 'ignore', 'pipe'] });
      let text = '';
      v.stderr.on('data', (c) => (text += c));
      v.on('exit', () => resolve(text.trim()));
    })
  ).replace(/^nginx version: /, '');
  // The worker serves the requests: its CPU time is what a transfer costs nginx.
  let workerPid = null;
  try {
    workerPid = Number(fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/)[0]) || null;
  } catch {
    workerPid = null;
  }
  return {
    url,
    version,
    pid: child.pid,
    workerPid,
    async stop() {
      child.kill('SIGQUIT');
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)));
      fs.rmSync(prefix, { recursive: true, force: true });
    },
  };
}
