// approve-legacy.mjs calls one tool with the TypeScript SDK 1.32.2 on an
// earlier protocol (initialize handshake), declaring the elicitation
// capability: the gateway's approval form reaches it as a server-initiated
// elicitation/create (mcp-go's bridge), which the handler answers.
//
// Input (JSON on stdin): { url, headers, tool, args, action }
// Output (JSON on stdout): { shown: [form messages], result: Result, sessionId }

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { readInput, summarize } from "./lib.mjs";

const input = readInput();
const shown = [];
const client = new Client({ name: "mailbox-mcp-tests (typescript-sdk legacy)", version: "1" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  shown.push(req.params.message);
  return { action: input.action, content: {} };
});
const transport = new StreamableHTTPClientTransport(new URL(input.url), { requestInit: { headers: input.headers } });
await client.connect(transport);
const result = summarize(await client.callTool({ name: input.tool, arguments: input.args }));
const out = { shown, result, sessionId: transport.sessionId ?? null };
await client.close();
process.stdout.write(JSON.stringify(out));
