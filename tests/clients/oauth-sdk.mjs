// oauth-sdk.mjs signs in to the gateway the way a hosted MCP client that
// adds a server by URL does: the official TypeScript SDK's OAuth client
// (StreamableHTTPClientTransport with an authProvider, which runs the SDK's
// auth(): discovery, dynamic registration, PKCE), with the sign-in page
// filled in by a real headless browser (Debian's Chromium driven by
// puppeteer-core). The redirect goes to a local HTTP server here that
// captures the code; then transport.finishAuth(code), and tools/list and
// imap_list_folders with nothing but the bearer token.
//
// Input (JSON on stdin): { url, user, password, wrongPassword?, chromium?, scope?,
//   provider?, sendTo?, markerFile?, waitMs? }
// With provider (a button value such as "provider:oidc-hydra") the page's
// "Continue with" button is clicked instead of typing a password, and the
// provider's own pages (login, consent) are followed; sendTo sends one
// message there; markerFile is written when the first calls are done, then
// the script waits waitMs and calls imap_list_folders and sends again (the
// SDK refreshes the expired token meanwhile): { later: {folders, sent} }.
// With scope (e.g. "mail.read"), the client asks for that scope only (as a
// connector that wants less does) and then tries to get more: it asks
// imap_encrypt_credentials for every combination of access, send and agent
// over its bearer token, and uses each token it gets to create a folder.
// Output (JSON on stdout):
//   { wrongPasswordPage, tools: [names], folders: Result, scope, tokenKind, requests: [{method, auth, other}],
//     escalation?: [{args, result: Result, createFolder?: Result, tools?: [names]}], bearerCreate?: Result }

import { createServer } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { fail, readInput, summarize } from "./lib.mjs";

const input = readInput();
const serverUrl = new URL(input.url);

// The redirect target: a loopback server that captures the code.
let onCallback;
const callbackHit = new Promise((resolve) => (onCallback = resolve));
const cb = createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname !== "/callback") {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "Content-Type": "text/plain" }).end("signed in; you can close this page");
  onCallback(u.searchParams);
});
await new Promise((r) => cb.listen(0, "127.0.0.1", r));
const redirectUrl = `http://127.0.0.1:${cb.address().port}/callback`;

const browserHome = mkdtempSync(join(tmpdir(), "chromium-"));
const browser = await puppeteer.launch({
  executablePath: input.chromium || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", `--user-data-dir=${join(browserHome, "profile")}`],
  env: { ...process.env, HOME: browserHome, TMPDIR: browserHome },
});

const out = { requests: [] };
let expectedState;

// An OAuthClientProvider with in-memory storage.
const store = {};
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "mailbox-mcp tests (typescript-sdk oauth)",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state() {
    expectedState = `st-${Math.random().toString(36).slice(2)}`;
    return expectedState;
  },
  clientInformation: () => store.client,
  saveClientInformation: (c) => (store.client = c),
  tokens: () => store.tokens,
  saveTokens: (t) => (store.tokens = t),
  saveCodeVerifier: (v) => (store.verifier = v),
  codeVerifier: () => store.verifier,
  async redirectToAuthorization(url) {
    if (input.scope) url.searchParams.set("scope", input.scope);
    const page = await browser.newPage();
    await page.goto(url.toString(), { waitUntil: "load" });
    if (input.wrongPassword) {
      await page.type("#username", input.user);
      await page.type("#password", input.wrongPassword);
      await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click('button[value="allow"]')]);
      out.wrongPasswordPage = await page.$eval("#error", (e) => e.textContent).catch(() => null);
      out.wrongPasswordURL = page.url();
      await page.$eval("#username", (e) => (e.value = ""));
    }
    if (input.provider) {
      // The provider's pages follow: its login form (unless it signs the
      // user in by itself), then back through the gateway to the app.
      await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(`button[value="${input.provider}"]`)]);
      if (await page.$("#email")) {
        await page.type("#email", input.user);
        await page.type("#password", input.password);
        await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#login")]);
      }
      for (let i = 0; i < 20 && new URL(page.url()).pathname !== "/callback"; i++) await page.waitForNavigation({ waitUntil: "load", timeout: 10000 });
    } else {
      await page.type("#username", input.user);
      await page.type("#password", input.password);
      await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click('button[value="allow"]')]);
    }
    out.landedOn = new URL(page.url()).pathname;
    await page.close();
  },
};

// Record what each request to /mcp carried (to show only the bearer token went).
const recordingFetch = async (u, init) => {
  const h = new Headers(init?.headers);
  if (String(u).startsWith(serverUrl.origin + "/mcp")) {
    let method;
    try {
      method = JSON.parse(init?.body ?? "{}").method;
    } catch {}
    const other = [...h.keys()].filter((k) => k.startsWith("x-imap") || k === "x-mailbox-token");
    out.requests.push({ method, auth: (h.get("authorization") || "").split(" ")[0], other });
  }
  return fetch(u, init);
};

try {
  const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
  const client = new Client({ name: "mailbox-mcp-tests (typescript-sdk oauth)", version: "1" });
  try {
    await client.connect(first);
    fail("connect without signing in should have needed authorization");
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const params = await callbackHit;
  if (params.get("state") !== expectedState) fail(`state mismatch: ${params.get("state")} vs ${expectedState}`);
  if (params.get("error")) fail(`authorization error: ${params.get("error")} ${params.get("error_description")}`);
  await first.finishAuth(params.get("code"));
  out.scope = store.tokens?.scope;
  out.tokenKind = store.tokens?.access_token?.slice(0, 5);

  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
  const signedIn = new Client({ name: "mailbox-mcp-tests (typescript-sdk oauth)", version: "1" });
  await signedIn.connect(transport);
  out.tools = (await signedIn.listTools()).tools.map((t) => t.name);
  out.folders = summarize(await signedIn.callTool({ name: "imap_list_folders", arguments: {} }));
  if (input.sendTo) {
    out.sent = summarize(await signedIn.callTool({ name: "smtp_send_email", arguments: { to: [input.sendTo], subject: "provider sign-in 1", text: "sent with a provider's token" } }));
  }
  if (input.markerFile) {
    writeFileSync(input.markerFile, "ready");
    await new Promise((r) => setTimeout(r, input.waitMs ?? 0));
    out.later = { folders: summarize(await signedIn.callTool({ name: "imap_list_folders", arguments: {} })) };
    if (input.sendTo) {
      out.later.sent = summarize(await signedIn.callTool({ name: "smtp_send_email", arguments: { to: [input.sendTo], subject: "provider sign-in 2", text: "sent after a refresh" } }));
    }
    out.tokens = store.tokens;
  }
  if (input.scope) {
    out.bearerCreate = summarize(await signedIn.callTool({ name: "imap_create_folder", arguments: { name: "Escalated-bearer" } }));
    out.escalation = [];
    for (const access of [undefined, "read", "organize", "full"]) {
      for (const send of [undefined, true, false]) {
        for (const agent of [undefined, "beta"]) {
          const args = { verify: false };
          if (access) args.access = access;
          if (send !== undefined) args.send = send;
          if (agent) args.agent = agent;
          const entry = { args, result: summarize(await signedIn.callTool({ name: "imap_encrypt_credentials", arguments: args })) };
          const token = entry.result.structured?.token;
          if (token) {
            // Use the token as a client would: its own connection, the
            // x-mailbox-token header, no bearer.
            const tc = new Client({ name: "mailbox-mcp-tests (derived token)", version: "1" });
            await tc.connect(new StreamableHTTPClientTransport(serverUrl, { requestInit: { headers: { "x-mailbox-token": token } } }));
            entry.tools = (await tc.listTools()).tools.map((t) => t.name);
            entry.createFolder = summarize(await tc.callTool({ name: "imap_create_folder", arguments: { name: "Escalated-token" } }));
            await tc.close();
          }
          out.escalation.push(entry);
        }
      }
    }
  }
  await signedIn.close();
} finally {
  await browser.close();
  cb.close();
}
process.stdout.write(JSON.stringify(out));
