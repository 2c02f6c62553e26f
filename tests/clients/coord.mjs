// coord.mjs: two agents coordinating through mail with the official
// TypeScript SDK over streamable HTTP. Agent B peeks, then waits for mail
// tagged input.tag; agent A sends such a message; B's wait returns it; B
// checks (consumes) it; a second check returns nothing.
//
// Input (JSON on stdin): { "url": "...", "a": {headers}, "b": {headers}, "b_address": "...", "tag": "..." }
// Output (JSON on stdout): { peek, wait, waitMs, send, first, second }

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fail, readInput, summarize } from "./lib.mjs";

const input = readInput();

async function connect(headers) {
  const transport = new StreamableHTTPClientTransport(new URL(input.url), { requestInit: { headers } });
  const client = new Client({ name: "mailbox-mcp-tests (coordination)", version: "1" });
  await client.connect(transport);
  return client;
}

async function main() {
  const a = await connect(input.a);
  const b = await connect(input.b);
  try {
    const peek = summarize(await b.callTool({ name: "imap_peek_inbox", arguments: { tag: input.tag } }));
    const since = peek.structured?.next_since_uid;
    const started = Date.now();
    let progress = 0;
    const waiting = b.callTool(
      { name: "imap_wait_for_email", arguments: { tag: input.tag, since_uid: since, timeout_s: 30 } },
      undefined,
      { timeout: 60000, resetTimeoutOnProgress: true, onprogress: () => progress++ },
    );
    await new Promise((r) => setTimeout(r, 500));
    const send = summarize(
      await a.callTool({
        name: "smtp_send_email",
        arguments: { to: [input.b_address], subject: "handoff " + input.tag, text: "please take this over", tags: [input.tag] },
      }),
    );
    const wait = summarize(await waiting);
    const waitMs = Date.now() - started;
    const first = summarize(await b.callTool({ name: "imap_check_inbox", arguments: { tag: input.tag } }));
    const second = summarize(await b.callTool({ name: "imap_check_inbox", arguments: { tag: input.tag } }));
    return { peek, wait, waitMs, progress, send, first, second };
  } finally {
    await a.close();
    await b.close();
  }
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + "\n"),
  (err) => fail(err.stack ?? String(err)),
);
