// hiding.mjs renders the hiding corpus (hiding-cases.mjs) in headless
// Chromium and judges, from its pixels, which text runs of each message a
// person sees (judge.mjs), for tests/hiding_test.go.
//
// Input (JSON on stdin): { chromium, workDir, only } (only: a substring of
// the case names to keep, "" for all)
// Output (JSON on stdout): [{ name, html, runs: [{ text, visible, pixels, how }] }]

import { readFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import puppeteer from "puppeteer-core";
import { cases } from "./hiding-cases.mjs";
import { judge, newJudgePage } from "./judge.mjs";

const input = JSON.parse(readFileSync(0, "utf8"));
const home = join(input.workDir, "chromium-hiding");
mkdirSync(home, { recursive: true });
const list = cases().filter((c) => !input.only || c.name.includes(input.only));
const browser = await puppeteer.launch({
  executablePath: input.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars", `--user-data-dir=${join(home, "profile")}`],
  env: { ...process.env, HOME: home, TMPDIR: home },
});
const out = [];
try {
  // One page: headless Chromium paints only the page in front, so a
  // second one would wait for its screenshots.
  const page = await newJudgePage(browser);
  for (const c of list) out.push({ ...c, runs: await judge(page, c.html) });
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
