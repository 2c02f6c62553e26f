// corpus.mjs renders real HTML mail from the npm packages of package.json
// and asks headless Chromium what a reader sees in each, for
// tests/corpus_test.go. Nothing of the templates is kept in the repository:
// they come from the installed packages, built here the way their users
// build them.
//
//   - foundation-emails: the compiled templates it ships (.download/templates,
//     which link dist/foundation-emails.css), with Foundation's preheader
//     markup added, in two renditions made with juice: "inlined" (styles
//     inlined, only the @media rules left in <style>, as Foundation's own
//     inliner does) and "stylesheet" (inlined, and the whole stylesheet
//     kept in <style>, preserveImportant);
//   - mailgen: its four themes, each with three messages (welcome,
//     receipt, password reset with a code);
//   - create-email: the four React Email starters, compiled with esbuild
//     ('react-email' is @react-email/components) and rendered with
//     @react-email/render with their PreviewProps;
//   - mjml: three messages written with MJML's components (a newsletter, a
//     receipt, a sign-in code), compiled with mjml.
//
// Input (JSON on stdin): { chromium, workDir }
// Output (JSON on stdout): [{ name, html, text, hidden }], where text is
// Chromium's document.body.innerText at 1000 px and hidden the text of the
// text nodes Chromium does not paint (display:none, visibility, opacity 0,
// no box, under 1 px, or clipped by an empty box that hides its overflow).

import { readFileSync, readdirSync, writeFileSync, mkdirSync } from "node:fs";
import { join, basename } from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);
const input = JSON.parse(readFileSync(0, "utf8"));
const mods = join(import.meta.dirname, "node_modules");
const out = [];

// --- Foundation for Emails --------------------------------------------------
{
  const { default: juice } = await import("juice");
  const css = readFileSync(join(mods, "foundation-emails/dist/foundation-emails.css"), "utf8");
  const dir = join(mods, "foundation-emails/.download/templates");
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".html")).sort()) {
    let html = readFileSync(join(dir, f), "utf8");
    html = html.replace(/<link rel="stylesheet"[^>]*>/, `<style>${css}</style>`);
    // Foundation's documented preheader: hidden by span.preheader.
    html = html.replace(/<body>/, `<body><span class="preheader">Pangolin zeppelin marmalade preheader quokka</span>`);
    out.push({ name: `foundation/${basename(f, ".html")}/inlined`, html: juice(html, { preserveMediaQueries: true }) });
    out.push({
      name: `foundation/${basename(f, ".html")}/stylesheet`,
      html: juice(html, { removeStyleTags: false, preserveImportant: true }),
    });
  }
}

// --- mailgen ----------------------------------------------------------------
{
  const Mailgen = require("mailgen");
  const messages = {
    welcome: {
      body: {
        name: "John Appleseed",
        intro: "Welcome to Mailgen! We're very excited to have you on board.",
        action: {
          instructions: "To get started with Mailgen, please click here:",
          button: { color: "#22BC66", text: "Confirm your account", link: "https://mailgen.js/confirm?s=d9729feb74992cc3482b350163a1a010" },
        },
        outro: "Need help, or have questions? Just reply to this email, we'd love to help.",
      },
    },
    receipt: {
      body: {
        name: "Jane Doe",
        intro: "Your order 20461 has been processed successfully.",
        table: {
          data: [
            { item: "Node.js", description: "Event-driven I/O server-side JavaScript environment based on V8.", price: "$10.99" },
            { item: "Mailgen", description: "Programmatically create beautiful e-mails using plain old JavaScript.", price: "$1.99" },
          ],
          columns: { customWidth: { item: "20%", price: "15%" }, customAlignment: { price: "right" } },
        },
        action: { instructions: "You can check the status of your order and more in your dashboard:", button: { color: "#3869D4", text: "Go to Dashboard", link: "https://mailgen.js/dashboard" } },
        outro: "We thank you for your purchase.",
      },
    },
    reset: {
      body: {
        name: "Alex Smith",
        intro: ["You have received this email because a password reset request for your account was received.", "Your one-time code is 144833, valid for 10 minutes."],
        action: { instructions: "Click the button below to reset your password:", button: { color: "#DC4D2F", text: "Reset your password", link: "https://mailgen.js/reset?s=b350163a1a010d9729feb74992c1a010" } },
        outro: "If you did not request a password reset, no further action is required on your part.",
      },
    },
  };
  for (const theme of ["default", "neopolitan", "salted", "cerberus"]) {
    const gen = new Mailgen({ theme, product: { name: "Mailgen", link: "https://mailgen.js/" } });
    for (const [name, email] of Object.entries(messages)) {
      out.push({ name: `mailgen/${theme}/${name}`, html: gen.generate(email) });
    }
  }
}

// --- React Email (create-email's starters) ------------------------------------
{
  const esbuild = await import("esbuild");
  const React = await import("react");
  const { render } = await import("@react-email/render");
  const dir = join(mods, "create-email/template/emails");
  const build = join(input.workDir, "react-email");
  mkdirSync(build, { recursive: true });
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".tsx")).sort()) {
    const outfile = join(build, basename(f, ".tsx") + ".mjs");
    await esbuild.build({
      entryPoints: [join(dir, f)],
      outfile,
      bundle: true,
      format: "esm",
      platform: "node",
      jsx: "automatic",
      alias: { "react-email": "@react-email/components" },
      nodePaths: [mods],
      external: ["react", "react-dom", "react/*", "react-dom/*", "@react-email/*"],
      logLevel: "error",
    });
    // Bare imports of the bundle resolve from here, not from workDir.
    const code = readFileSync(outfile, "utf8").replace(/from ["']((?:react|react-dom|@react-email\/[a-z-]+)(?:\/[a-z./-]+)?)["']/g,
      (_, spec) => `from ${JSON.stringify(pathToFileURL(require.resolve(spec)).href)}`);
    writeFileSync(outfile, code);
    const mod = await import(pathToFileURL(outfile).href);
    const Component = mod.default;
    const html = await render(React.createElement(Component, Component.PreviewProps || {}));
    out.push({ name: `react-email/${basename(f, ".tsx")}`, html });
  }
}

// --- MJML ---------------------------------------------------------------------
{
  const { default: mjml2html } = await import("mjml");
  const docs = {
    newsletter: `<mjml>
  <mj-head>
    <mj-title>Spring newsletter</mj-title>
    <mj-preview>Aardvark hummingbird preview xylophone</mj-preview>
    <mj-attributes>
      <mj-all font-family="Helvetica, Arial, sans-serif" />
      <mj-text font-size="15px" color="#333333" line-height="22px" />
      <mj-class name="muted" color="#888888" font-size="12px" />
    </mj-attributes>
    <mj-style inline="inline">.headline div { letter-spacing: 1px; }</mj-style>
    <mj-style>@media (max-width:480px) { .desktop-only { display:none !important; } }</mj-style>
  </mj-head>
  <mj-body background-color="#f4f4f4">
    <mj-section background-color="#1f2d3d" padding="30px 0">
      <mj-column><mj-text align="center" color="#ffffff" font-size="26px" css-class="headline">The Spring Issue 2026</mj-text></mj-column>
    </mj-section>
    <mj-section background-color="#ffffff">
      <mj-column width="60%">
        <mj-text>Our garden project grew to 1250 volunteers this season, planting 8300 trees across 42 neighbourhoods.</mj-text>
        <mj-button href="https://example.org/garden" background-color="#2e7d32">Join the next planting</mj-button>
      </mj-column>
      <mj-column width="40%">
        <mj-image src="https://example.org/tree.png" alt="A young oak" />
        <mj-text mj-class="muted">Photo: the oak planted at Riverside Park.</mj-text>
      </mj-column>
    </mj-section>
    <mj-section background-color="#ffffff"><mj-column><mj-divider border-color="#dddddd" /><mj-spacer height="20px" /></mj-column></mj-section>
    <mj-section background-color="#ffffff">
      <mj-column><mj-text><h2>Upcoming events</h2></mj-text>
        <mj-table>
          <tr style="border-bottom:1px solid #ecedee;text-align:left;"><th>Date</th><th>Event</th><th>Place</th></tr>
          <tr><td>April 12</td><td>Seed swap</td><td>Library hall</td></tr>
          <tr><td>May 3</td><td>Bee walk</td><td>North meadow</td></tr>
        </mj-table>
      </mj-column>
    </mj-section>
    <mj-section background-color="#ffffff"><mj-column>
      <mj-social mode="horizontal"><mj-social-element name="facebook" href="https://example.org/fb">Facebook</mj-social-element><mj-social-element name="twitter" href="https://example.org/x">Twitter</mj-social-element></mj-social>
    </mj-column></mj-section>
    <mj-section><mj-column><mj-text mj-class="muted" align="center">You receive this because you joined Green Streets. Unsubscribe at any time.</mj-text></mj-column></mj-section>
  </mj-body>
</mjml>`,
    receipt: `<mjml>
  <mj-head><mj-preview>Platypus receipt marzipan preview</mj-preview><mj-breakpoint width="520px" /></mj-head>
  <mj-body>
    <mj-wrapper background-color="#fafafa" padding="20px">
      <mj-section><mj-column><mj-text font-size="20px" font-weight="bold">Thanks for your order, Maria</mj-text>
        <mj-text>Order 558213 placed on March 9. It ships within 2 business days.</mj-text></mj-column></mj-section>
      <mj-section>
        <mj-group>
          <mj-column><mj-text>Wireless keyboard</mj-text><mj-text>Desk lamp</mj-text></mj-column>
          <mj-column><mj-text align="right">EUR 129.00</mj-text><mj-text align="right">EUR 45.50</mj-text></mj-column>
        </mj-group>
      </mj-section>
      <mj-section><mj-column><mj-text align="right" font-weight="bold">Total EUR 174.50</mj-text>
        <mj-button href="https://shop.example/orders/558213">Track your order</mj-button></mj-column></mj-section>
      <mj-hero mode="fixed-height" height="200px" background-url="https://shop.example/hero.jpg" background-color="#2a2a2a" background-height="200px" background-width="600px">
        <mj-text color="#ffffff" align="center" font-size="22px">Spring sale: 20 percent off garden tools</mj-text>
      </mj-hero>
    </mj-wrapper>
  </mj-body>
</mjml>`,
    signin: `<mjml>
  <mj-head><mj-preview>Wombat signin nectarine preview</mj-preview></mj-head>
  <mj-body>
    <mj-section><mj-column>
      <mj-text font-size="18px">Your sign-in code</mj-text>
      <mj-text font-size="32px" letter-spacing="6px" container-background-color="rgba(0,0,0,0.05)" align="center">739201</mj-text>
      <mj-text color="#666666">The code expires in 15 minutes. If you did not try to sign in, you can ignore this message.</mj-text>
      <mj-accordion><mj-accordion-element><mj-accordion-title>Why did I get this?</mj-accordion-title><mj-accordion-text>Someone entered your address on the sign-in page.</mj-accordion-text></mj-accordion-element></mj-accordion>
    </mj-column></mj-section>
  </mj-body>
</mjml>`,
  };
  for (const [name, src] of Object.entries(docs)) {
    const r = await mjml2html(src, { validationLevel: "soft" });
    out.push({ name: `mjml/${name}`, html: r.html });
  }
}

// --- the reference: what Chromium shows -------------------------------------
const { default: puppeteer } = await import("puppeteer-core");
const home = join(input.workDir, "chromium");
mkdirSync(home, { recursive: true });
const browser = await puppeteer.launch({
  executablePath: input.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", `--user-data-dir=${join(home, "profile")}`],
  env: { ...process.env, HOME: home, TMPDIR: home },
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 800 });
  await page.setRequestInterception(true);
  page.on("request", (req) => (req.url().startsWith("data:") ? req.continue() : req.abort()));
  for (const t of out) {
    await page.setContent(t.html, { waitUntil: "load" });
    Object.assign(
      t,
      await page.evaluate(() => {
        const text = document.body ? document.body.innerText : "";
        const hidden = [];
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
          const t = n.data.trim();
          const el = n.parentElement;
          if (!t || !el || el.closest("script,style,title,noscript,template")) continue;
          let shown = el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
          if (shown) {
            const r = document.createRange();
            r.selectNodeContents(n);
            shown = [...r.getClientRects()].some((x) => x.width >= 1 && x.height >= 1);
          }
          if (shown && parseFloat(getComputedStyle(el).fontSize) < 1) shown = false;
          for (let a = el; shown && a && a !== document.body; a = a.parentElement) {
            const cs = getComputedStyle(a);
            if (cs.overflow !== "visible" && (a.clientHeight === 0 || a.clientWidth === 0)) shown = false;
          }
          if (!shown) hidden.push(t);
        }
        return { text, hidden: hidden.join("\n") };
      }),
    );
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
