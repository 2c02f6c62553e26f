// mcp-remote.mjs drives mcp-remote (the stdio bridge Claude Desktop runs)
// exactly as Claude Desktop would: it starts the command of a
// claude_desktop_config.json server entry and speaks newline-delimited
// JSON-RPC with it over stdio: initialize, tools/list, then one call to every
// tool listed (the listing and a read first, anything that sends mail last).
//
// Input (JSON on stdin):
//   { "server": { "command": "npx", "args": [...] },  // the config entry
//     "user": "...", "password": "...",               // for imap_encrypt_credentials
//     "timeoutMs": 60000 }
// Output (JSON on stdout): { protocolVersion, serverInfo, tools: [{name,
// annotations}], calls: [{tool, args, isError, text, structured}], skipped:
// [names] }. Diagnostics (and mcp-remote's own log) go to stderr.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { argsFor, fail, readInput, summarize } from "./lib.mjs";

const input = readInput();
const { server } = input;
if (!server?.command || !Array.isArray(server.args)) fail("input.server needs command and args");
const timeoutMs = input.timeoutMs ?? 60000;

const child = spawn(server.command, server.args, {
  stdio: ["pipe", "pipe", "inherit"],
  env: { ...process.env, ...(server.env ?? {}) },
});
child.on("error", (e) => fail(`cannot start ${server.command}: ${e.message}`));
let exited = false;
child.on("exit", (code, sig) => {
  exited = true;
  for (const p of pending.values()) p.reject(new Error(`mcp-remote exited (${code ?? sig}) before answering`));
  pending.clear();
});

const pending = new Map();
let nextId = 1;
createInterface({ input: child.stdout }).on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    process.stderr.write(`non-JSON line from mcp-remote: ${line}\n`);
    return;
  }
  if (msg.id !== undefined && pending.has(msg.id)) {
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.error) p.reject(new Error(`${p.method}: JSON-RPC error ${msg.error.code}: ${msg.error.message}`));
    else p.resolve(msg.result);
  }
  // notifications and server requests are not needed here
});

function send(obj) {
  child.stdin.write(JSON.stringify(obj) + "\n");
}

function request(method, params) {
  if (exited) return Promise.reject(new Error("mcp-remote is not running"));
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error(`${method}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    pending.set(id, { resolve, reject, timer, method });
    send({ jsonrpc: "2.0", id, method, params });
  });
}

async function main() {
  const init = await request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "mailbox-mcp-tests (as Claude Desktop)", version: "1" },
  });
  send({ jsonrpc: "2.0", method: "notifications/initialized" });

  const tools = [];
  let cursor;
  do {
    const page = await request("tools/list", cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);

  // The listing first (the test compares it with the mailbox as it was
  // before this run), then the read, the other read-only tools, and tools
  // that change something last.
  const rank = (t) =>
    t.name === "imap_list_emails" ? 0 : t.name === "imap_read_email" ? 1 : t.annotations?.readOnlyHint === true ? 2 : 3;
  const order = [...tools].sort((a, b) => rank(a) - rank(b));
  const ctx = { user: input.user, password: input.password, newest: null };
  const calls = [];
  const skipped = [];
  for (const tool of order) {
    const args = argsFor(tool, ctx);
    if (args === null) {
      skipped.push(tool.name);
      continue;
    }
    const res = summarize(await request("tools/call", { name: tool.name, arguments: args }));
    if (tool.name === "imap_list_emails" && !res.isError) ctx.newest = res.structured?.messages?.[0] ?? null;
    const shown = { ...args };
    if ("password" in shown) shown.password = "(hidden)";
    calls.push({ tool: tool.name, args: shown, ...res });
  }
  return {
    protocolVersion: init.protocolVersion,
    serverInfo: init.serverInfo,
    tools: tools.map((t) => ({ name: t.name, annotations: t.annotations ?? {} })),
    calls,
    skipped,
  };
}

main().then(
  (out) => {
    process.stdout.write(JSON.stringify(out) + "\n");
    child.stdin.end();
    child.kill("SIGTERM");
    process.exitCode = 0;
  },
  (err) => {
    child.kill("SIGTERM");
    fail(err.message);
  },
);
