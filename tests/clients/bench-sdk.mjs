// bench-sdk.mjs is the official TypeScript SDK's side of cmd/mailbox-bench:
// one Client over streamable HTTP, connected once, making one tool call per
// line it reads, so that the Go side can alternate it with the bare IMAP
// commands on the same machine load. One call at a time, never batched.
//
// Input (JSON lines on stdin):
//   first: { "url": "...", "headers": { "x-imap-user": "...", "x-imap-pass": "..." } }
//   then:  { "name": "...", "arguments": {...}, "check": {...} }   one call each
//          { "quit": true }                                         closes the client, exits
// check (all optional): messages (structuredContent.messages has exactly
// this many entries), min_total (structuredContent.total is at least this),
// uid (structuredContent.uid is this and structuredContent.text is not
// empty). A tool error (isError) is always a wrong answer.
//
// Output (JSON lines on stdout):
//   after connecting: { "ready": true, "tools": n }  or  { "error": "..." }
//   per call:         { "ns": latency, "ok": true }  or  { "ns": latency, "error": "..." }
// ns is measured with process.hrtime.bigint() around client.callTool only
// (not the reading of the line, the check, nor the answer to Go).

import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function send(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// checkResult returns "" for a right answer, else what is wrong.
function checkResult(res, check) {
  if (res.isError) {
    const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
    return `tool error: ${text.slice(0, 500)}`;
  }
  const s = res.structuredContent;
  if (!s || typeof s !== "object") return "no structured content";
  if (check?.messages !== undefined) {
    const got = Array.isArray(s.messages) ? s.messages.length : -1;
    if (got !== check.messages) return `${got} messages, want ${check.messages}`;
  }
  if (check?.min_total !== undefined && !(s.total >= check.min_total)) {
    return `total ${s.total}, want at least ${check.min_total}`;
  }
  if (check?.uid !== undefined) {
    if (s.uid !== check.uid) return `uid ${s.uid}, want ${check.uid}`;
    if (typeof s.text !== "string" || s.text === "") return `uid ${s.uid}: no text`;
  }
  return "";
}

async function main() {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) return;
  const setup = JSON.parse(first.value);
  const transport = new StreamableHTTPClientTransport(new URL(setup.url), {
    requestInit: { headers: setup.headers ?? {} },
  });
  const client = new Client({ name: "mailbox-bench (typescript-sdk)", version: "1" });
  try {
    await client.connect(transport);
    // What every host does first; it also makes callTool check each
    // structured result against the tool's output schema, as it does for
    // users.
    const { tools } = await client.listTools();
    send({ ready: true, tools: tools.length });
  } catch (e) {
    send({ error: `connect: ${e.message ?? e}` });
    process.exitCode = 1;
    return;
  }
  try {
    for (;;) {
      const next = await lines.next();
      if (next.done) break;
      if (next.value.trim() === "") continue;
      const req = JSON.parse(next.value);
      if (req.quit) break;
      const t0 = process.hrtime.bigint();
      let res, err;
      try {
        res = await client.callTool({ name: req.name, arguments: req.arguments ?? {} });
      } catch (e) {
        err = e;
      }
      const ns = Number(process.hrtime.bigint() - t0);
      if (err) {
        send({ ns, error: String(err.message ?? err) });
        continue;
      }
      const bad = checkResult(res, req.check);
      send(bad ? { ns, error: `${req.name}: ${bad}` } : { ns, ok: true });
    }
  } finally {
    await client.close();
  }
}

main().catch((e) => {
  process.stderr.write(`bench-sdk: ${e.stack ?? e}\n`);
  send({ error: String(e.message ?? e) });
  process.exitCode = 1;
});
