// approve-page.mjs is a person approving through the approval page: a
// client without elicitation (the official SDK over stdio to mcp-remote,
// as Claude Desktop runs it) calls a tool and gets the approval link.
// First the model tries it with only HTTP (as an agent with curl would):
// it reads the page, then posts an answer with a cookie and form value of
// its own. Then the person: headless Chromium (puppeteer-core) opens the
// link, signs in as the mailbox, reads the page and clicks Approve or
// Reject; then the form is submitted a second time (a double click, or
// the back button), which must do nothing more.
//
// Input (JSON on stdin): { server: {command, args}, tool, args, action: "approve"|"reject", user, password, chromium? }
// Output (JSON on stdout): { result: Result, model: text the HTTP-only client read, modelStatus,
//   forgedStatus, signIn: text of the page before signing in, page: text of the page, done: text
//   after the answer, doneStatus, again: text after the second submit, againStatus }

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { fail, readInput, summarize } from "./lib.mjs";

const input = readInput();
const client = new Client({ name: "mailbox-mcp-tests (page approval)", version: "1" }, { capabilities: {} });
await client.connect(new StdioClientTransport({ command: input.server.command, args: input.server.args, env: { ...process.env }, stderr: "inherit" }));
const result = summarize(await client.callTool({ name: input.tool, arguments: input.args }));
await client.close();
const link = result.structured?.approval?.url;
if (!link) fail(`no approval link in the result: ${result.text}`);

// The model: the link, and HTTP.
const textOf = (html) => html.replace(/<style[\s\S]*?<\/style>/g, "").replace(/<[^>]+>/g, " ").replace(/\s+/g, " ");
const look = await fetch(link);
const out = { result, modelStatus: look.status, model: textOf(await look.text()) };
const forged = await fetch(link, {
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", cookie: "mbx_approve=forged; mbx_approver=forged" },
  body: new URLSearchParams({ csrf: "forged", action: "approve" }),
});
out.forgedStatus = forged.status;

const home = mkdtempSync(join(tmpdir(), "chromium-"));
const browser = await puppeteer.launch({
  executablePath: input.chromium || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", `--user-data-dir=${join(home, "profile")}`],
  env: { ...process.env, HOME: home, TMPDIR: home },
});
try {
  const page = await browser.newPage();
  await page.setBypassCSP(true); // for the second submission below, made from a script
  await page.goto(link, { waitUntil: "load" });
  out.signIn = await page.$eval("main", (m) => m.innerText);
  await page.$eval("#username", (e) => (e.value = ""));
  await page.type("#username", input.user);
  await page.type("#password", input.password);
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#signin-button")]);
  out.page = await page.$eval("main", (m) => m.innerText);
  const csrf = await page.$eval('input[name="csrf"]', (e) => e.value);
  const cookies = await page.cookies();
  const [answer] = await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(`button[value="${input.action}"]`)]);
  out.doneStatus = answer?.status();
  out.done = await page.$eval("main", (m) => m.innerText);
  // The same form submitted again, with the cookie it was opened with (a
  // double click, or the form reopened from the browser's history).
  await page.setCookie(...cookies);
  const again = await page.evaluate(async (csrf, action) => {
    const res = await fetch(location.href, { method: "POST", body: new URLSearchParams({ csrf, action }), credentials: "same-origin" });
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    return { status: res.status, text: doc.querySelector("main")?.textContent ?? "" };
  }, csrf, input.action);
  out.againStatus = again.status;
  out.again = again.text;
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
