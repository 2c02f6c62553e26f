// desktop-entry.mjs runs a claude_desktop_config.json server entry the way
// Claude Desktop does, using the official TypeScript SDK's stdio client: it
// starts the entry's command with its args, unchanged, as an MCP server on
// stdio, then initializes, lists the tools and calls imap_list_folders (the
// login comes from the entry itself, e.g. mcp-remote's --header options).
// The process runs in this directory, so `npx -y mcp-remote@VERSION` finds
// the locked, installed mcp-remote.
//
// Input (JSON on stdin):
//   { "server": { "command": "npx", "args": [...], "env": {...} } }  // the config entry
// Output (JSON on stdout):
//   { serverInfo, tools: [names], listFolders: {isError, text, structured} }
// Diagnostics (and the server's own stderr) go to stderr.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { fail, readInput, summarize } from "./lib.mjs";

const input = readInput();
const { server } = input;
if (!server?.command || !Array.isArray(server.args)) fail("input.server needs command and args");

const transport = new StdioClientTransport({
  command: server.command,
  args: server.args,
  env: { ...process.env, ...(server.env ?? {}) },
  cwd: process.cwd(),
  stderr: "inherit",
});
const client = new Client({ name: "mailbox-mcp-tests (as Claude Desktop)", version: "1" });

async function main() {
  await client.connect(transport);
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  const listFolders = summarize(await client.callTool({ name: "imap_list_folders", arguments: {} }));
  return {
    serverInfo: client.getServerVersion() ?? null,
    tools,
    listFolders,
  };
}

main().then(
  async (out) => {
    process.stdout.write(JSON.stringify(out) + "\n");
    await client.close();
  },
  async (err) => {
    await client.close().catch(() => {});
    fail(err.message);
  },
);
