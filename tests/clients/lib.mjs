// Shared helpers of the client scripts: reading the test's input, and
// choosing harmless arguments for each tool the gateway lists.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

// readInput returns the JSON object the Go test writes on standard input.
export function readInput() {
  const raw = readFileSync(0, "utf8");
  try {
    return JSON.parse(raw);
  } catch (e) {
    fail(`input is not JSON: ${e.message}`);
  }
}

// fail prints the reason on stderr and exits 1.
export function fail(msg) {
  process.stderr.write(`client script: ${msg}\n`);
  process.exit(1);
}

// The tools every client must see.
export const READ_TOOLS = [
  "imap_encrypt_credentials",
  "imap_list_folders",
  "imap_list_emails",
  "imap_search_emails",
  "imap_read_email",
  "imap_get_thread",
  "imap_peek_inbox",
  "imap_wait_for_email",
  "imap_check_inbox",
];

export const SEND_SUBJECT = "mailbox-mcp client test: sent through mcp-remote";

// argsFor returns the arguments to call tool with, or null when the tool is
// not known to be harmless (it is then reported as skipped). ctx carries
// what earlier calls learnt: user, password, newest (the newest message's
// summary).
export function argsFor(tool, ctx) {
  const ro = tool.annotations?.readOnlyHint === true;
  switch (tool.name) {
    case "imap_encrypt_credentials":
      return { user: ctx.user, password: ctx.password };
    case "imap_list_folders":
      return {};
    case "imap_list_emails":
      return { folder: "INBOX", limit: 20 };
    case "imap_search_emails":
      return ctx.newest ? { folder: "INBOX", subject: ctx.newest.subject, limit: 5 } : { folder: "INBOX", limit: 5 };
    case "imap_read_email":
      return ctx.newest ? { folder: "INBOX", uid: ctx.newest.uid, max_chars: 2000 } : null;
    case "imap_get_thread":
      return ctx.newest ? { folder: "INBOX", uid: ctx.newest.uid } : null;
    case "imap_peek_inbox":
      return { folder: "INBOX" };
    case "imap_wait_for_email":
      // nothing new arrives during the test: a short wait that times out
      return { folder: "INBOX", timeout_s: 1 };
    case "imap_check_inbox":
      // it marks what it returns as read, which the test checks is not
      // done by reading: not called
      return null;
  }
  const props = tool.inputSchema?.properties ?? {};
  const required = tool.inputSchema?.required ?? [];
  if (tool.name === "smtp_send_email" || tool.name === "smtp_reply_email") {
    // Mail goes to the test user itself (a reply goes to the newest
    // message's sender, whose domain the test mail stack discards).
    const args = {};
    for (const [name, schema] of Object.entries(props)) {
      const v = sendValue(name, schema, ctx);
      if (v !== undefined) args[name] = v;
    }
    return required.every((r) => r in args) ? args : null;
  }
  if (ro) {
    // an unknown read-only tool: its required arguments, when they are ones
    // we know, else an empty call (a clear argument error is also an answer)
    const args = {};
    for (const name of required) {
      if (name === "folder") args.folder = "INBOX";
      else if (name === "uid" && ctx.newest) args.uid = ctx.newest.uid;
    }
    return args;
  }
  return null;
}

function sendValue(name, schema, ctx) {
  const many = schema?.type === "array";
  switch (name) {
    case "to":
      return many ? [ctx.user] : ctx.user;
    case "subject":
      return SEND_SUBJECT;
    case "body":
    case "text":
      return "Sent by tests/clients through mcp-remote. Harmless.";
    case "uid":
      return ctx.newest?.uid;
    case "folder":
      return "INBOX";
  }
  return undefined;
}

// summary keeps what the Go test asserts on from a tools/call result:
// the text, the structured result, and each embedded resource's URI,
// media type, decoded size and SHA-256 (the bytes themselves stay here).
export function summarize(result) {
  const text = (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("");
  const resources = (result.content ?? [])
    .filter((c) => c.type === "resource" && typeof c.resource?.blob === "string")
    .map((c) => {
      const bytes = Buffer.from(c.resource.blob, "base64");
      return {
        uri: c.resource.uri,
        mimeType: c.resource.mimeType ?? "",
        size: bytes.length,
        sha256: createHash("sha256").update(bytes).digest("hex"),
      };
    });
  return {
    isError: result.isError === true,
    text: text.length > 2000 ? text.slice(0, 2000) + "…" : text,
    structured: result.structuredContent ?? null,
    ...(resources.length > 0 ? { resources } : {}),
  };
}
