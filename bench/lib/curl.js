/**
 * One HTTP transfer timed by curl (`-w %{time_total}`): the same native client for Coffer and its baselines,
 * so neither side is measured through a JavaScript client's own limits.
 */
import { execFile } from 'node:child_process';

/**
 * { status, seconds, bytes } for one request; `upload` is a file path sent as the body; `from` the local address to
 * connect from (e.g. 127.0.0.2: not a trusted proxy's).
 */
export function curl(url, { method = 'GET', upload, headers = {}, from } = {}) {
  const args = ['-s', '-o', '/dev/null', '-w', '%{http_code} %{time_total} %{size_download} %{size_upload}', '-X', method, '-H', 'Expect:'];
  if (from) args.push('--interface', from);
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  if (upload) args.push('--data-binary', `@${upload}`);
  args.push(url);
  return new Promise((resolve, reject) => {
    execFile('curl', args, { encoding: 'utf8', maxBuffer: 1 << 20 }, (error, stdout) => {
      if (error) return reject(new Error(`curl ${method} ${url}: ${error.message}`));
      const [status, seconds, down, up] = stdout.trim().split(' ').map(Number);
      resolve({ status, seconds, bytes: upload ? up : down });
    });
  });
}
