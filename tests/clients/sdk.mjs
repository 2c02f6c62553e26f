// sdk.mjs drives the gateway with the official TypeScript SDK's client over
// streamable HTTP, the way an "http" MCP server entry is used (Claude Code,
// .mcp.json): first with the x-imap headers of the entry, then with no
// headers and a credentials token (made by imap_encrypt_credentials in the
// first session) passed as the credentials argument.
//
// Input (JSON on stdin):
//   { "server": { "type": "http", "url": "...", "headers": {...} },  // the .mcp.json entry
//     "user": "...", "password": "..." }
// Output (JSON on stdout):
//   { headers: Session, token: Session, noCredentials: {isError, text} }
//   Session = { protocolVersion, tools: [names], list: Result, read: Result }
//   Result  = { isError, text, structured }

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fail, readInput, summarize } from "./lib.mjs";

const input = readInput();
const { server } = input;
if (server?.type !== "http" || !server.url) fail('input.server must be an entry with "type": "http" and a url');

async function session(headers, extraArgs) {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers },
  });
  const client = new Client({ name: "mailbox-mcp-tests (typescript-sdk)", version: "1" });
  await client.connect(transport);
  try {
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      tools.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    const list = summarize(
      await client.callTool({ name: "imap_list_emails", arguments: { ...extraArgs, folder: "INBOX", limit: 20 } }),
    );
    const newest = list.structured?.messages?.[0];
    const read = newest
      ? summarize(
          await client.callTool({
            name: "imap_read_email",
            arguments: { ...extraArgs, folder: "INBOX", uid: newest.uid, max_chars: 2000 },
          }),
        )
      : null;
    let token = null;
    if (!extraArgs.credentials) {
      const enc = summarize(
        await client.callTool({
          name: "imap_encrypt_credentials",
          arguments: { user: input.user, password: input.password },
        }),
      );
      if (enc.isError) throw new Error(`imap_encrypt_credentials failed: ${enc.text}`);
      token = enc.structured?.token;
    }
    return { protocolVersion: transport.protocolVersion ?? null, tools, list, read, token };
  } finally {
    await client.close();
  }
}

async function main() {
  const withHeaders = await session(server.headers ?? {}, {});
  if (!withHeaders.token) throw new Error("no token from imap_encrypt_credentials");
  const withToken = await session({}, { credentials: withHeaders.token });

  // neither headers nor a token: a tool error that says what to send
  const transport = new StreamableHTTPClientTransport(new URL(server.url));
  const client = new Client({ name: "mailbox-mcp-tests (typescript-sdk)", version: "1" });
  await client.connect(transport);
  const none = summarize(await client.callTool({ name: "imap_list_emails", arguments: {} }));
  await client.close();

  delete withHeaders.token; // not printed
  return { headers: withHeaders, token: withToken, noCredentials: { isError: none.isError, text: none.text } };
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + "\n"),
  (err) => fail(err.stack ?? String(err)),
);
