// docker-smoke.mjs drives a gateway running in a container (scripts/docker-ci.sh)
// with the official TypeScript SDK over streamable HTTP, as a user would:
// list folders; in "full" mode also send a message to the user itself, find
// it and read it back, and wait once (imap_wait_for_email, short timeout).
// Exits 1 with the reason on stderr when any answer is wrong.
//
//   node docker-smoke.mjs URL USER PASSWORD [list|full]

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fail } from "./lib.mjs";

const [url, user, password, mode = "full"] = process.argv.slice(2);
if (!url || !user || !password) fail("usage: docker-smoke.mjs URL USER PASSWORD [list|full]");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { "x-imap-user": user, "x-imap-pass": password } },
});
const client = new Client({ name: "mailbox-mcp docker-ci", version: "1" });

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  const text = (r.content ?? []).map((c) => c.text ?? "").join("\n");
  if (r.isError) fail(`${name}: tool error: ${text}`);
  return r.structuredContent ?? {};
}

async function main() {
  await client.connect(transport);
  const folders = (await call("imap_list_folders", {})).folders ?? [];
  const names = folders.map((f) => f.name);
  if (!names.includes("INBOX")) fail(`imap_list_folders: no INBOX in ${JSON.stringify(names)}`);
  const out = { folders: names.length };
  if (mode === "full") {
    const subject = `docker-ci ${process.pid} ${Date.now()}`;
    const body = `sent through the container at ${new Date().toISOString()}`;
    await call("smtp_send_email", { to: [user], subject, text: body });
    // delivery (Postfix -> LMTP -> Dovecot) is asynchronous: look for it
    let hit;
    for (let i = 0; i < 50 && !hit; i++) {
      const found = await call("imap_search_emails", { folder: "INBOX", subject, limit: 5 });
      hit = (found.messages ?? []).find((m) => m.subject === subject);
      if (!hit) await new Promise((r) => setTimeout(r, 200));
    }
    if (!hit) fail(`the message "${subject}" never arrived in INBOX`);
    const read = await call("imap_read_email", { folder: "INBOX", uid: hit.uid, max_chars: 2000 });
    if (!JSON.stringify(read).includes(body)) fail(`imap_read_email: the body is not "${body}": ${JSON.stringify(read).slice(0, 500)}`);
    const t0 = Date.now();
    const wait = await call("imap_wait_for_email", { folder: "INBOX", timeout_s: 1 });
    if (wait.timed_out !== true) fail(`imap_wait_for_email: nothing new arrives, want timed_out: ${JSON.stringify(wait)}`);
    out.sent = subject;
    out.read_uid = hit.uid;
    out.wait = { ms: Date.now() - t0, keys: Object.keys(wait) };
  }
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => fail(e?.stack ?? String(e)));
