// approve.mjs calls one tool with the official TypeScript client of the
// 2026-07-28 protocol (@modelcontextprotocol/client, v2 SDK line), whose
// elicitation handler answers the gateway's approval form; the client
// fulfils the input_required result and retries the call with the answer
// and the requestState, as the protocol's multi round-trip requests do.
//
// With mode "url" the client declares URL-mode elicitation instead of
// forms: the gateway then gives it the approval page's link to open for
// its user (recorded in asked), never to the model.
//
// Input (JSON on stdin):
//   { url, headers, tool, args, action: "accept"|"decline"|"cancel", mode?: "form"|"url",
//     tamper?: "state"|"arguments"|"user"|"expired"|"replay",
//     otherHeaders?, otherArgs?, expiredState? }
// tamper changes the retry before it leaves: a byte of the requestState,
// the arguments (otherArgs), the credentials (otherHeaders), the state
// (expiredState); "replay" sends the accepted retry a second time.
// Output (JSON on stdout): { shown: [form messages], asked: [{mode, url,
//   elicitationId}], result: Result, replay?: Result }

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { readFileSync } from "node:fs";

const input = JSON.parse(readFileSync(0, "utf8"));
const url = new URL(input.url);
const shown = [];
const asked = [];
let retry;

// The fetch every request goes through: it changes the retry (the
// request carrying a requestState) as asked, and remembers it.
const tamperingFetch = async (u, init) => {
  let body = init?.body;
  const headers = new Headers(init?.headers);
  if (typeof body === "string") {
    const msg = JSON.parse(body);
    if (msg.params?.requestState !== undefined) {
      switch (input.tamper) {
        case "state": {
          const s = msg.params.requestState;
          const i = Math.floor(s.length / 2);
          msg.params.requestState = s.slice(0, i) + (s[i] === "A" ? "B" : "A") + s.slice(i + 1);
          break;
        }
        case "arguments":
          msg.params.arguments = input.otherArgs;
          break;
        case "user":
          for (const [k, v] of Object.entries(input.otherHeaders)) headers.set(k, v);
          break;
        case "expired":
          msg.params.requestState = input.expiredState;
          break;
      }
      body = JSON.stringify(msg);
      retry = { body, headers: Object.fromEntries(headers.entries()) };
    }
  }
  return fetch(u, { ...init, body, headers });
};

const client = new Client(
  { name: "mailbox-mcp-tests (client v2)", version: "1" },
  { capabilities: { elicitation: input.mode === "url" ? { url: {} } : { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
client.setRequestHandler("elicitation/create", async (req) => {
  shown.push(req.params.message);
  asked.push({ mode: req.params.mode ?? "form", url: req.params.url ?? null, elicitationId: req.params.elicitationId ?? null });
  return req.params.mode === "url" ? { action: input.action } : { action: input.action, content: {} };
});
await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: input.headers }, fetch: tamperingFetch }));
const summarize = (r) => ({
  isError: r.isError === true,
  text: (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join(""),
  structured: r.structuredContent ?? null,
});
const out = { shown, asked, result: summarize(await client.callTool({ name: input.tool, arguments: input.args })) };
if (input.tamper === "replay" && retry) {
  // The accepted retry again, byte for byte, as an eavesdropper would.
  const res = await fetch(url, { method: "POST", headers: retry.headers, body: retry.body });
  const text = await res.text();
  let msg;
  try {
    msg = JSON.parse(text);
  } catch {
    msg = JSON.parse(text.split("\n").find((l) => l.startsWith("data: "))?.slice(6) ?? "{}");
  }
  out.replay = msg.result ? summarize(msg.result) : { isError: true, text: JSON.stringify(msg.error ?? msg) };
}
await client.close();
process.stdout.write(JSON.stringify(out));
