// approve-provider.mjs is a person approving on the approval page by
// signing in at the mailbox's provider: headless Chromium opens the link,
// chooses "Continue with" the provider, goes through the provider's pages
// (which sign the person in by themselves in the test provider), comes
// back through the gateway's callback and its page that goes on to the
// approval, reads the approval and answers it.
//
// Input (JSON on stdin): { link, provider: button value, action: "approve"|"reject"|"none", chromium? }
// Output (JSON on stdout): { signIn: page text before, visited: URLs, landed: the page's path at the end,
//   page: its text, done: text after the answer, doneStatus }

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";
import { readInput } from "./lib.mjs";

const input = readInput();
const home = mkdtempSync(join(tmpdir(), "chromium-"));
const browser = await puppeteer.launch({
  executablePath: input.chromium || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-background-networking", `--user-data-dir=${join(home, "profile")}`],
  env: { ...process.env, HOME: home, TMPDIR: home },
});
const out = {};
try {
  const page = await browser.newPage();
  await page.goto(input.link, { waitUntil: "load" });
  out.signIn = await page.$eval("main", (m) => m.innerText);
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(`button[value="${input.provider}"]`)]);
  // The provider's redirects, the callback, and the gateway's page that
  // goes on by itself (a meta refresh).
  const visited = [page.url()];
  page.on("framenavigated", (f) => f === page.mainFrame() && visited.push(f.url()));
  out.visited = visited;
  // waitForSelector outlasts the navigations on the way (it looks again in
  // each new document).
  await page.waitForSelector("#approve, #error, .error", { timeout: 30000 });
  await new Promise((r) => setTimeout(r, 200));
  out.landed = new URL(page.url()).pathname;
  out.page = await page.$eval("main", (m) => m.innerText);
  if (input.action !== "none" && (await page.$("#approve"))) {
    const [answer] = await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(`button[value="${input.action}"]`)]);
    out.doneStatus = answer?.status();
    out.done = await page.$eval("main", (m) => m.innerText);
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
