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

// changes lists the pixels of two same-sized screenshots that a person
// can tell apart, as [x, y] pairs; null when the sizes differ (a change of
// the whole page).
function changes(a, b, decoded) {
  if (a.equals(b)) return [];
  const pa = decoded.get(a) || PNG.sync.read(a), pb = PNG.sync.read(b);
  decoded.set(a, pa);
  if (pa.width !== pb.width || pa.height !== pb.height) return null;
  const out = [];
  const x = pa.data, y = pb.data;
  for (let i = 0; i < x.length; i += 4) {
    if (x[i] === y[i] && x[i + 1] === y[i + 1] && x[i + 2] === y[i + 2]) continue;
    const l1 = luminance(x[i], x[i + 1], x[i + 2]), l2 = luminance(y[i], y[i + 1], y[i + 2]);
    if ((Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05) < minContrast) continue;
    out.push([(i / 4) % pa.width, Math.floor(i / 4 / pa.width)]);
  }
  return out;
}

// seen reports whether changed pixels make something a person can see:
// at least minSize pixels each way.
function seen(px) {
  if (!px.length) return false;
  let x0 = Infinity, x1 = -1, y0 = Infinity, y1 = -1;
  for (const [x, y] of px) {
    x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
  }
  return x1 - x0 + 1 >= minSize && y1 - y0 + 1 >= minSize;
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
//
// Runs are judged in groups, to take fewer screenshots: the runs of a
// group have boxes (getClientRects, a margin added for ink that overflows)
// that do not overlap, and are made transparent together. A changed pixel
// inside one run's box is that run's; a changed pixel in no box of the
// group (a run that paints away from its box) sends the group's runs to be
// judged one at a time, as are the options of a <select>.
export async function judge(page, html) {
  await page.setContent(html, { waitUntil: "load" });
  const runs = await page.evaluate((css) => {
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
      const r = document.createRange();
      r.selectNodeContents(n);
      const boxes = [...r.getClientRects()].filter((b) => b.width > 0 || b.height > 0).map((b) => {
        const m = Math.max(6, b.height / 4);
        return [b.left + scrollX - m, b.top + scrollY - m, b.right + scrollX + m, b.bottom + scrollY + m];
      });
      window.__judgeRuns.push(n);
      out.push({ text: n.data, how, boxes });
    }
    return out;
  }, judgeCSS);
  const area = await paintArea(page);
  const base = await shoot(page, area);
  const decoded = new Map();
  const overlaps = (p, q) => p.some((a) => q.some((b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]));
  // Groups of runs whose boxes do not overlap.
  const groups = [];
  const single = [];
  for (let i = 0; i < runs.length; i++) {
    if (runs[i].how === "select") {
      single.push(i);
      continue;
    }
    const g = groups.find((g) => g.every((j) => !overlaps(runs[i].boxes, runs[j].boxes)));
    if (g) g.push(i);
    else groups.push([i]);
  }
  for (const g of groups) {
    await transparent(page, g, runs, true);
    const px = changes(base, await shoot(page, area), decoded);
    await transparent(page, g, runs, false);
    if (px === null) {
      single.push(...g);
      continue;
    }
    const mine = new Map(g.map((i) => [i, []]));
    let stray = false;
    for (const p of px) {
      const owners = g.filter((i) => runs[i].boxes.some((b) => p[0] >= b[0] && p[0] <= b[2] && p[1] >= b[1] && p[1] <= b[3]));
      if (owners.length === 1) mine.get(owners[0]).push(p);
      else stray = true;
    }
    if (stray && g.length > 1) {
      single.push(...g);
      continue;
    }
    for (const i of g) {
      const p = g.length === 1 ? px : mine.get(i);
      runs[i].pixels = p.length;
      runs[i].visible = seen(p);
    }
  }
  for (const i of single) {
    let against = base;
    if (runs[i].how === "select") {
      // The select keeps its width; the base is taken again that way.
      await page.evaluate((i) => {
        const n = window.__judgeRuns[i];
        const sel = n.parentElement.closest("select");
        window.__judgeSaved = [n.data, sel.getAttribute("style")];
        sel.style.setProperty("width", getComputedStyle(sel).width, "important");
        sel.style.setProperty("min-width", "0", "important");
      }, i);
      against = await shoot(page, area);
    }
    await transparent(page, [i], runs, true);
    const px = changes(against, await shoot(page, area), decoded);
    await transparent(page, [i], runs, false);
    runs[i].pixels = px === null ? -1 : px.length;
    runs[i].visible = px === null || seen(px);
  }
  for (const r of runs) delete r.boxes;
  return runs;
}

// transparent makes runs (their indexes in list) transparent, or undoes it.
function transparent(page, indexes, list, on) {
  return page.evaluate((indexes, hows, on, marker) => {
    const ranges = [];
    indexes.forEach((i, k) => {
      const n = window.__judgeRuns[i];
      switch (hows[k]) {
        case "highlight":
          if (on) {
            const r = new Range();
            r.selectNodeContents(n);
            ranges.push(r);
          }
          break;
        case "svg":
          if (on) n.parentElement.setAttribute(marker, "");
          else n.parentElement.removeAttribute(marker);
          break;
        case "select":
          if (on) n.data = "";
          else {
            const sel = n.parentElement.closest("select");
            n.data = window.__judgeSaved[0];
            if (window.__judgeSaved[1] === null) sel.removeAttribute("style");
            else sel.setAttribute("style", window.__judgeSaved[1]);
          }
          break;
      }
    });
    if (on && ranges.length) CSS.highlights.set("judge-run", new Highlight(...ranges));
    else if (!on) CSS.highlights.clear();
  }, indexes, indexes.map((i) => list[i].how), on, marker);
}
