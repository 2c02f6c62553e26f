package mailmsg

// HiddenRule is one way mail hides text from its reader, as HTMLToText
// judges it: what counts as hidden, and why a person does not see it.
// docs/tools.md lists them (internal/tools renders this list).
type HiddenRule struct{ What, Why string }

// HiddenRules are the rules HTMLToText applies, in the words of the
// reference. tests/hiding_test.go checks each against what Chromium paints.
var HiddenRules = []HiddenRule{
	{"`display:none`, `visibility:hidden` or `collapse`, `content-visibility:hidden`", "the browser lays out or paints nothing of it"},
	{"a font under 1 px (also through `font` or a transform's scale)", "nothing readable is painted"},
	{"opacity under 0.1, `filter: opacity()` included, multiplied down the tree", "the text is painted too faint to see"},
	{"a text colour whose contrast with its background (both composited, the page white) is under 1.2, `-webkit-text-fill-color` included; `color` counts on `<font>` and `<body text>`, `bgcolor` and `background` on body and the table elements only, as browsers map them", "text the colour of its background cannot be read; `color` on a `<p>` or `bgcolor` on a `<div>` do nothing in a browser, so they hide nothing"},
	{"a block (not an inline element, not a table cell) at most 1 px wide or high that clips its overflow (`overflow:hidden` or `clip`), as in the screen-reader-only pattern", "what it holds is cut to one pixel; without clipping (`width:0;height:0` alone) the text overflows and shows"},
	{"`clip` to an empty or 1-pixel rectangle on an absolutely placed box; `clip-path` to an empty shape (`inset(50%)`, `circle(0)`, a polygon without area)", "everything outside the clip is not painted"},
	{"a transform that flattens the box (`scale(0)`, `scaleX(0)`, the `scale` property, a matrix without area) on a block or inline-block (transforms do nothing on inline elements)", "the box is painted with no area"},
	{"text placed entirely left of or above the page: absolutely placed boxes (`left:-9999px`, `right:10000px`, `top:-9999px`), a negative `margin-left`, `position:relative` or `translate` to the left, the first line of a block after a negative `text-indent`", "a person can scroll right and down, never left of the page or above it; where the text lands is bounded from above (1.25 em per ASCII character, 3 em for others, the page no wider than 1000 px or the widest width the message declares), so text is hidden only when even the bound is off the page"},
	{"the `hidden` attribute and a `<dialog>` without `open`, unless the sender's CSS sets `display`; `<rp>`; `hidden=until-found`", "the browser's own style sheet gives them `display:none`, below any `display` of the sender's"},
	{"the options of a drop-down `<select>` other than the one it shows (the last one `selected`, else the first one enabled); the text of an option with a `label`", "a closed drop-down paints only its chosen option's label"},
	{"`<datalist>` and its options", "never rendered, whatever the CSS"},
	{"the fallback content of `<video>` and `<audio>`, and of an `<object>` that displays an image from a `data:` URL", "a browser that plays media or shows the object never renders what is inside"},
	{"in SVG: text outside `<text>`, `<desc>`, `<title>`, `<metadata>` and definitions; an `<svg>` of zero width or height (unless its overflow is visible); the presentation attributes `display`, `visibility`, `opacity`, `fill` and `font-size`", "SVG paints only its `<text>` elements, inside its own box"},
	{"a closed `<details>` (all but its first `<summary>`)", "the browser shows only the summary until it is opened"},
	{"any of the above through a custom property (`display:var(--h)`), resolved from the cascade like the browser", "the value the browser computes is what hides"},
	{"text nested deeper than 512 elements", "the parser stops there (as Chromium's does): its place in the tree is unknown"},
}

// NotHiddenRules are what is not judged hidden although it may look so,
// and what is kept in the text with a warning when it cannot be decided.
var NotHiddenRules = []HiddenRule{
	{"`mso-hide:all`", "only desktop Outlook reads it"},
	{"`<noscript>` and `<canvas>` content", "mail programs run no scripts, so browsers render them"},
	{"the fallback of an `<object>` with no data, or with data that is remote or `cid:`", "shown when the object does not load, which depends on the mail program: kept, and a remote or cid: one is reported as possibly hidden"},
	{"rules for `:hover`, `::before`, `@media print`, dark mode or small screens; selectors cascadia cannot match exactly", "they do not apply to a desktop reader in light mode as the message opens"},
	{"far offsets whose place cannot be bounded (against a positioned ancestor, in right-to-left or right-aligned lines, in percent, upwards in the normal flow, inside flex or grid)", "kept in the text, and listed after the hidden text as possibly hidden, with a warning: the reader may or may not see them"},
}
