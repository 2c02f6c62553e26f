// mcp-remote-oauth.mjs runs mcp-remote's own OAuth flow against the
// gateway, headless: mcp-remote is started as Claude Desktop starts it
// (over stdio, with only the URL), finds the gateway asks for a sign-in,
// and opens the sign-in page through xdg-open, whose $BROWSER is
// browser-standin.mjs (headless Chromium choosing the provider). Then
// tools/list and imap_list_folders.
//
// Input (JSON on stdin): { url, provider, user, password, chromium? }
// Output (JSON on stdout): { tools: [names], folders: Result, browser: [log lines] }

import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { readInput, summarize } from "./lib.mjs";

const input = readInput();
const dir = mkdtempSync(join(tmpdir(), "mcp-remote-oauth-"));
const logFile = join(dir, "browser.log");
writeFileSync(logFile, "");
const standin = join(dir, "browser");
const here = fileURLToPath(new URL(".", import.meta.url));
writeFileSync(standin, `#!/bin/sh\nexec ${process.execPath} ${join(here, "browser-standin.mjs")} "$1"\n`);
chmodSync(standin, 0o755);

const env = {
  ...process.env,
  BROWSER: standin,
  DISPLAY: "",
  STANDIN_LOG: logFile,
  STANDIN_CHROMIUM: input.chromium || "/usr/bin/chromium",
  STANDIN_PROVIDER: input.provider,
  STANDIN_USER: input.user,
  STANDIN_PASSWORD: input.password,
};
const client = new Client({ name: "mailbox-mcp-tests (mcp-remote oauth)", version: "1" }, { capabilities: {} });
const transport = new StdioClientTransport({ command: "npx", args: ["-y", "mcp-remote@0.15.1", input.url], env, stderr: "inherit", cwd: here });
const out = {};
try {
  await client.connect(transport);
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.folders = summarize(await client.callTool({ name: "imap_list_folders", arguments: {} }));
} finally {
  out.browser = readFileSync(logFile, "utf8").split("\n").filter(Boolean);
  await client.close();
}
process.stdout.write(JSON.stringify(out));
