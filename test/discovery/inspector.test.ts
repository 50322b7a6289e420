/**
 * The Inspector CLI check of docs/api-rules.md#discovery against a real server. It downloads
 * @modelcontextprotocol/inspector@1.0.3 from the npm registry, so it runs only when asked
 * (COFFER_TEST_INSPECTOR=1): the default suite needs no network.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;

describe.runIf(process.env.COFFER_TEST_INSPECTOR === '1')('MCP Inspector CLI 1.0.3', () => {
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.stop());

  it('lists the tools of /mcp', { timeout: 240_000 }, async () => {
    const { stdout } = await promisify(execFile)(
      'npx',
      ['-y', '@modelcontextprotocol/inspector@1.0.3', '--cli', `${server.url}/mcp`, '--transport', 'http', '--method', 'tools/list'],
      { timeout: 230_000, maxBuffer: 10 * 1024 * 1024 },
    );
    const { tools } = JSON.parse(stdout) as { tools: { name: string; annotations: { readOnlyHint: boolean } }[] };
    expect(tools.map((t) => t.name).sort()).toEqual(['get_api_docs', 'get_cli_install', 'get_overview', 'get_pricing', 'search_docs']);
    for (const tool of tools) expect(tool.annotations.readOnlyHint).toBe(true);
  });
});
