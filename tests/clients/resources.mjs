// resources.mjs: the gateway's MCP resources and prompts through the
// official TypeScript SDK over streamable HTTP: resources/list, the
// templates, resources/read of the message and attachment URIs the test
// gives (and of one that does not exist), prompts/list and prompts/get.
//
// Input (JSON on stdin):
//   { "url": "...", "headers": {...}, "read": ["mailbox://...", ...],
//     "missing": "mailbox://...", "prompt": { "name": "...", "arguments": {...} },
//     "badPrompt": { "name": "...", "arguments": {...} } }
// Output (JSON on stdout):
//   { protocolVersion, capabilities, resources: [...], templates: [...],
//     reads: [{uri, contents} | {uri, error}], missing: {error},
//     prompts: [...], prompt: GetPromptResult, badPrompt: {error} }
//   error = { code, message, data }

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fail, readInput } from "./lib.mjs";

const input = readInput();

// rpcError keeps what the SDK's McpError carries of a JSON-RPC error.
function rpcError(e) {
  return { code: e.code ?? null, message: e.message ?? String(e), data: e.data ?? null };
}

async function attempt(fn) {
  try {
    return { result: await fn() };
  } catch (e) {
    return { error: rpcError(e) };
  }
}

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(input.url), { requestInit: { headers: input.headers } });
  const client = new Client({ name: "mailbox-mcp-tests (resources)", version: "1" });
  await client.connect(transport);
  try {
    const resources = (await client.listResources()).resources;
    const templates = (await client.listResourceTemplates()).resourceTemplates;
    const reads = [];
    for (const uri of input.read) {
      const r = await attempt(() => client.readResource({ uri }));
      reads.push(r.error ? { uri, error: r.error } : { uri, contents: r.result.contents });
    }
    const missing = await attempt(() => client.readResource({ uri: input.missing }));
    const prompts = (await client.listPrompts()).prompts;
    const prompt = await client.getPrompt(input.prompt);
    const badPrompt = await attempt(() => client.getPrompt(input.badPrompt));
    return {
      protocolVersion: transport.protocolVersion ?? null,
      capabilities: client.getServerCapabilities(),
      resources,
      templates,
      reads,
      missing: { error: missing.error ?? null, result: missing.result ?? null },
      prompts,
      prompt,
      badPrompt: { error: badPrompt.error ?? null },
    };
  } finally {
    await client.close();
  }
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + "\n"),
  (err) => fail(err.stack ?? String(err)),
);
