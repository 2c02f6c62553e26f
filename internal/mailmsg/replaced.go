package mailmsg

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif" // object data: images, checked as a browser decodes them
	_ "image/jpeg"
	_ "image/png"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// What an <object> shows.
const (
	objectFallback = iota // its content: it has nothing to display
	objectShown           // what it embeds: its content is fallback, never rendered
	objectMaybe           // depends on the mail client: a remote or cid: resource may load or not
)

// objectDisplays tells what an <object> shows. Only an image inline in a
// data: URL is sure to display (mail clients load remote content or
// block it, as the reader chose; Chromium here loads nothing).
func objectDisplays(n *html.Node) int {
	data := strings.TrimSpace(attr(n, "data"))
	if data == "" {
		return objectFallback
	}
	if !strings.HasPrefix(strings.ToLower(data), "data:") {
		return objectMaybe
	}
	meta, payload, ok := strings.Cut(data[len("data:"):], ",")
	if !ok {
		return objectFallback
	}
	var raw []byte
	if strings.HasSuffix(strings.ToLower(meta), ";base64") {
		b, err := base64.StdEncoding.DecodeString(strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' {
				return -1
			}
			return r
		}, payload))
		if err != nil {
			return objectFallback
		}
		raw = b
	} else {
		s, err := url.PathUnescape(payload)
		if err != nil {
			return objectFallback
		}
		raw = []byte(s)
	}
	if t := strings.ToLower(strings.TrimSpace(attr(n, "type"))); t != "" && !strings.HasPrefix(t, "image/") {
		return objectMaybe
	}
	if _, _, err := image.DecodeConfig(bytes.NewReader(raw)); err == nil {
		return objectShown
	}
	if strings.HasPrefix(strings.ToLower(meta), "image/") {
		return objectFallback // an image a browser cannot decode: the fallback shows
	}
	return objectMaybe
}

// svgRendering applies SVG's rendering rules to element n of the svg
// namespace: its text paints only inside <text>; <desc>, <title>,
// <metadata> and the definitions (<defs>, gradients, masks, ...) paint
// nothing; an <svg> of zero width or height clips everything unless its
// overflow is visible. The presentation attributes display, visibility,
// opacity, fill and font-size apply like their CSS properties (below the
// sender's CSS).
func (r *renderer) svgRendering(n *html.Node, a *elemAttrs, own *ownStyle, st *visState) int {
	if st.svg == svgNone && n.Data != "svg" {
		return contentShown // a stray SVG element in HTML: as its parent
	}
	fresh := r.propsNode == n
	css := func(prop int) string {
		if fresh {
			return r.props.d[prop].val
		}
		return ""
	}
	switch n.Data {
	case "svg":
		w, h := attr(n, "width"), attr(n, "height")
		if v := css(propWidth); v != "" {
			w = v
		}
		if v := css(propHeight); v != "" {
			h = v
		}
		ov := css(propOverflow)
		if (isZeroLength(strings.TrimSpace(w)) || isZeroLength(strings.TrimSpace(h))) && ov != "visible" && ov != "auto" && ov != "scroll" {
			own.drop = true
		}
		own.svg = svgHidden
		return contentPlaceUnknown
	case "desc", "title", "metadata", "defs", "symbol", "clipPath", "mask", "pattern", "marker",
		"linearGradient", "radialGradient", "filter", "style", "script", "animate", "set",
		"animateMotion", "animateTransform", "mpath", "view", "cursor", "font", "font-face", "glyph":
		own.drop = true
	case "text":
		own.svg = svgText
	case "foreignObject":
		own.svg = svgForeign
	}
	if css(propDisplay) == "" && attr(n, "display") == "none" {
		own.drop = true
	}
	if own.vis == visUnset {
		switch attr(n, "visibility") {
		case "hidden", "collapse":
			own.vis = visHidden
		case "visible":
			own.vis = visShown
		}
	}
	if css(propOpacity) == "" {
		if o, ok := parseOpacity(strings.TrimSpace(attr(n, "opacity"))); ok {
			own.opacity *= o
		}
	}
	fill := css(propFill)
	if fill == "" {
		fill = strings.ToLower(strings.TrimSpace(attr(n, "fill")))
	}
	switch fill {
	case "":
	case "none":
		if attr(n, "stroke") == "" && css(propStroke) == "" {
			own.color = rgba{0, 0, 0, 0}
		}
	default:
		if c, ok := parseColor(fill); ok {
			own.color = c
		}
	}
	fo := css(propFillOpacity)
	if fo == "" {
		fo = strings.TrimSpace(attr(n, "fill-opacity"))
	}
	if o, ok := parseOpacity(fo); ok && own.color.a != 0 {
		if own.color.a < 0 {
			own.color = st.color
		}
		if own.color.a >= 0 {
			own.color.a *= o
		}
	}
	if own.font == "" {
		if fs := strings.TrimSpace(attr(n, "font-size")); fs != "" {
			if _, err := strconv.ParseFloat(fs, 64); err == nil {
				fs += "px"
			}
			own.font = fs
		}
	}
	return contentShown
}
