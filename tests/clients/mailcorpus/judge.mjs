// judge.mjs decides, from what headless Chromium paints, which text of an
// HTML message a person sees. For each text run (a text node with more than
// white space), the message is rendered, then rendered again with that run
// made transparent; a run whose second rendering paints no pixel a person
// can tell apart from the first is hidden.
//
// Chromium runs as a mail client renders mail: scripting disabled, nothing
// loaded from the network (data: URLs only), a desktop window 1000 px wide,
// light mode. Screenshots cover the whole page (what a person can scroll
// to); text moved above or left of the page cannot be scrolled to.
//
// How a run is made transparent without changing the layout:
//   - HTML text: a CSS custom highlight (::highlight) over the run's range,
//     painting it in transparent ink;
//   - SVG text (highlights do not reach it): the run's parent gets
//     fill and stroke transparent;
//   - an <option> of a <select>: the select keeps its width, and the run's
//     text is emptied (a select paints only the option it shows).
//
// Two pixels differ when a person can tell them apart: a contrast ratio
// (WCAG's) of at least minContrast between them, the same line the
// converter draws for text on its background (internal/mailmsg/css.go).

import { PNG } from "pngjs";

export const minContrast = 1.2;
// minSize is the smallest change, in pixels each way, a person can see as
// something: a change one pixel high (text clipped to a 1-pixel box) or
// wide is not text anyone reads.
export const minSize = 2;
const marker = "data-judge-transparent";
const judgeCSS = `::highlight(judge-run){color:transparent;-webkit-text-fill-color:transparent;text-shadow:none;text-decoration-color:transparent;background-color:transparent}` +
  `[${marker}]{fill:transparent!important;stroke:transparent!important;color:transparent!important;-webkit-text-fill-color:transparent!important}`;

// newJudgePage opens a page set up as a mail client.
export async function newJudgePage(browser) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 800 });
  await page.setJavaScriptEnabled(false);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  await page.setRequestInterception(true);
  page.on("request", (req) => (req.url().startsWith("data:") ? req.continue() : req.abort()));
  return page;
}

function luminance(r, g, b) {
  const lin = (v) => ((v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

// change compares two screenshots: the pixels a person can tell apart
// (count) and the box around them (width, height); a different page size
// is a change of the whole page.
function change(a, b, decoded) {
  if (a.equals(b)) return { count: 0, width: 0, height: 0 };
  const pa = decoded.get(a) || PNG.sync.read(a), pb = PNG.sync.read(b);
  decoded.set(a, pa);
  if (pa.width !== pb.width || pa.height !== pb.height) return { count: Infinity, width: Infinity, height: Infinity };
  let n = 0, x0 = Infinity, x1 = -1, y0 = Infinity, y1 = -1;
  const x = pa.data, y = pb.data;
  for (let i = 0; i < x.length; i += 4) {
    if (x[i] === y[i] && x[i + 1] === y[i + 1] && x[i + 2] === y[i + 2]) continue;
    const l1 = luminance(x[i], x[i + 1], x[i + 2]), l2 = luminance(y[i], y[i + 1], y[i + 2]);
    if ((Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05) < minContrast) continue;
    n++;
    const px = (i / 4) % pa.width, py = Math.floor(i / 4 / pa.width);
    x0 = Math.min(x0, px); x1 = Math.max(x1, px); y0 = Math.min(y0, py); y1 = Math.max(y1, py);
  }
  return n ? { count: n, width: x1 - x0 + 1, height: y1 - y0 + 1 } : { count: 0, width: 0, height: 0 };
}

// paintArea is the part of the page anything could paint in: the union of
// the boxes of all elements and text, within the page a person can scroll
// (from the top left corner on). Screenshots are cut to it: smaller ones
// are faster to take and compare.
function paintArea(page) {
  return page.evaluate(() => {
    let w = 1, h = 1;
    const add = (r) => {
      if (r.width > 0 || r.height > 0) {
        w = Math.max(w, r.right + scrollX);
        h = Math.max(h, r.bottom + scrollY);
      }
    };
    for (const el of document.querySelectorAll("*")) add(el.getBoundingClientRect());
    const walker = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
    const r = document.createRange();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      r.selectNodeContents(n);
      add(r.getBoundingClientRect());
    }
    const e = document.documentElement;
    return { x: 0, y: 0, width: Math.ceil(Math.min(w + 2, e.scrollWidth)), height: Math.ceil(Math.min(h + 2, e.scrollHeight)) };
  });
}

function shoot(page, clip) {
  return page.screenshot({ clip, captureBeyondViewport: true, type: "png", optimizeForSpeed: true });
}

// judge renders html and returns its runs in document order:
// [{ text, visible, pixels, how }].
export async function judge(page, html) {
  await page.setContent(html, { waitUntil: "load" });
  const runs = await page.evaluate((css, marker) => {
    const style = document.createElement("style");
    style.id = "judge-style";
    style.textContent = css;
    (document.head || document.documentElement).appendChild(style);
    window.__judgeRuns = [];
    const out = [];
    const walker = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.data.trim() || !n.parentElement || n.parentElement.closest("script,style,#judge-style")) continue;
      const el = n.parentElement;
      let how = "highlight";
      if (el.closest("select")) how = "select";
      else if (el.namespaceURI === "http://www.w3.org/2000/svg") how = "svg";
      window.__judgeRuns.push(n);
      out.push({ text: n.data, how });
    }
    return out;
  }, judgeCSS, marker);
  const area = await paintArea(page);
  const base = await shoot(page, area);
  const decoded = new Map();
  for (let i = 0; i < runs.length; i++) {
    const undo = await page.evaluate((i, how, marker) => {
      const n = window.__judgeRuns[i];
      if (how === "highlight") {
        const r = new Range();
        r.selectNodeContents(n);
        CSS.highlights.set("judge-run", new Highlight(r));
        return "highlight";
      }
      if (how === "svg") {
        n.parentElement.setAttribute(marker, "");
        return "svg";
      }
      const sel = n.parentElement.closest("select");
      window.__judgeSaved = [n.data, sel.getAttribute("style")];
      sel.style.setProperty("width", getComputedStyle(sel).width, "important");
      sel.style.setProperty("min-width", "0", "important");
      n.data = "";
      return "select";
    }, i, runs[i].how, marker);
    let shot = await shoot(page, area);
    let against = base;
    if (undo === "select") {
      // The base again with the select's width fixed, to compare like
      // with like.
      await page.evaluate((i) => { window.__judgeRuns[i].data = window.__judgeSaved[0]; }, i);
      against = await shoot(page, area);
    }
    await page.evaluate((i, how, marker) => {
      const n = window.__judgeRuns[i];
      if (how === "highlight") CSS.highlights.clear();
      else if (how === "svg") n.parentElement.removeAttribute(marker);
      else {
        const sel = n.parentElement.closest("select");
        const s = window.__judgeSaved[1];
        if (s === null) sel.removeAttribute("style");
        else sel.setAttribute("style", s);
      }
    }, i, runs[i].how, marker);
    const c = change(against, shot, decoded);
    runs[i].pixels = c.count === Infinity ? -1 : c.count;
    runs[i].visible = c.width >= minSize && c.height >= minSize;
  }
  return runs;
}
