// browser-standin.mjs is what $BROWSER runs when mcp-remote opens the
// sign-in page (through xdg-open): headless Chromium follows it as a
// person would, choosing the provider's "Continue with" button, filling the
// provider's login form if it shows one, until the page lands on
// mcp-remote's own callback on localhost. Usage: node browser-standin.mjs URL
// (settings in STANDIN_CHROMIUM, STANDIN_PROVIDER, STANDIN_USER,
// STANDIN_PASSWORD; what happened is appended to STANDIN_LOG).

import { appendFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

const url = process.argv[2];
const log = (msg) => appendFileSync(process.env.STANDIN_LOG, msg + "\n");
const home = mkdtempSync(join(tmpdir(), "standin-"));
const browser = await puppeteer.launch({
  executablePath: process.env.STANDIN_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", `--user-data-dir=${join(home, "profile")}`],
  env: { ...process.env, HOME: home, TMPDIR: home },
});
try {
  const page = await browser.newPage();
  await page.goto(url, { waitUntil: "load" });
  log(`opened ${new URL(page.url()).pathname}`);
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(`button[value="${process.env.STANDIN_PROVIDER}"]`)]);
  if (await page.$("#email")) {
    await page.type("#email", process.env.STANDIN_USER);
    await page.type("#password", process.env.STANDIN_PASSWORD);
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#login")]);
  }
  for (let i = 0; i < 20 && new URL(page.url()).hostname !== "localhost"; i++) {
    await page.waitForNavigation({ waitUntil: "load", timeout: 10000 });
  }
  log(`landed on ${new URL(page.url()).host}${new URL(page.url()).pathname}`);
} catch (e) {
  log(`failed: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
