// calls.mjs makes a list of tool calls with the official TypeScript SDK's
// client over streamable HTTP and prints each result, for tests that check
// what a real client sees (argument errors, for instance).
//
// Input (JSON on stdin):
//   { "url": "...", "headers": {...}, "list": false, "calls": [ { "name": "...", "arguments": {...} }, ... ] }
// Output (JSON on stdout):
//   { tools: [names] (with list: true), results: [ { isError, text, structured, resources? } | { protocolError: "..." } ] }

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fail, readInput, summarize } from "./lib.mjs";

const input = readInput();
if (!input.url || !Array.isArray(input.calls)) fail("input needs url and calls");

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(input.url), {
    requestInit: { headers: input.headers ?? {} },
  });
  const client = new Client({ name: "mailbox-mcp-tests (typescript-sdk calls)", version: "1" });
  await client.connect(transport);
  const results = [];
  let tools;
  try {
    if (input.list) tools = (await client.listTools()).tools.map((t) => t.name);
    for (const c of input.calls) {
      try {
        results.push(summarize(await client.callTool({ name: c.name, arguments: c.arguments })));
      } catch (e) {
        results.push({ protocolError: String(e.message ?? e) });
      }
    }
  } finally {
    await client.close();
  }
  return { ...(tools ? { tools } : {}), results };
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + "\n"),
  (err) => fail(err.stack ?? String(err)),
);
