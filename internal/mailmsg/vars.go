package mailmsg

import (
	"strings"
)

// Custom properties and var(): "--h: none" on an element, "display:
// var(--h)" on one inside it. Custom properties cascade like any other and
// are inherited; a value that uses var() is resolved for each element
// against its own custom properties, then read. A reference that cannot be
// resolved (an undefined property without a fallback, a cycle) makes the
// declaration invalid at computed-value time: it still wins the cascade,
// and the property then takes its inherited or initial value, as in CSS.
//
// The work is bounded: at most maxCustomProps properties per element, a
// resolved value of at most maxCustomBytes, and references nested at most
// maxVarDepth deep. Past a bound a value counts as invalid, and the
// element's text is reported as possibly hidden (it may not be what a
// browser computes).

const (
	maxCustomBytes = 4096
	maxCustomProps = 256
	maxVarDepth    = 32
)

// customProps are an element's custom properties, resolved: those it
// declares, then its parent's (a chain, so an element that declares one
// does not copy all it inherits); shared with its descendants until one
// declares its own. A property guaranteed-invalid on the element hides the
// parent's (an empty entry with invalid set).
type customProps struct {
	vals    map[string]string
	invalid map[string]bool
	parent  *customProps
}

func (c *customProps) get(name string) (string, bool) {
	for ; c != nil; c = c.parent {
		if c.invalid[name] {
			return "", false
		}
		if v, ok := c.vals[name]; ok {
			return v, true
		}
	}
	return "", false
}

// resolveVars computes the custom properties of an element (parent: its
// parent's) from the custom declarations in p, and resolves the var()
// references of its other declarations in p. It reports whether a bound
// was reached.
func resolveVars(p *cssProps, parent *customProps) (own *customProps, overLimit bool) {
	own = parent
	if len(p.custom) > 0 {
		// The winning declaration of each name.
		win := map[string]cssDecl{}
		for _, d := range p.custom {
			name, _, _ := strings.Cut(d.val, ":")
			if w, ok := win[name]; !ok || d.beats(w) {
				win[name] = d
			}
		}
		own = &customProps{vals: map[string]string{}, invalid: map[string]bool{}, parent: parent}
		// Raw values first, so that one property can refer to another of
		// the same element; then each is resolved in turn.
		raw := map[string]string{}
		for name, d := range win {
			_, v, _ := strings.Cut(d.val, ":")
			if len(raw) >= maxCustomProps {
				overLimit = true
				break
			}
			raw[name] = v
		}
		resolving := map[string]bool{}
		type result struct {
			v  string
			ok bool
		}
		memo := map[string]result{}
		var resolve func(name string, depth int) (string, bool)
		lookup := func(name string, depth int) (string, bool) {
			if _, mine := raw[name]; mine {
				return resolve(name, depth)
			}
			return parent.get(name)
		}
		resolve = func(name string, depth int) (string, bool) {
			if r, ok := memo[name]; ok {
				return r.v, r.ok
			}
			if resolving[name] {
				return "", false // a cycle
			}
			resolving[name] = true
			v, ok, over := substitute(raw[name], depth, lookup)
			delete(resolving, name)
			overLimit = overLimit || over
			ok = ok && strings.TrimSpace(v) != "initial"
			memo[name] = result{v, ok}
			return v, ok
		}
		for name := range raw {
			if v, ok := resolve(name, 0); ok {
				own.vals[name] = v
			} else {
				own.invalid[name] = true // guaranteed-invalid: as if undefined
			}
		}
	}
	for i := range p.d {
		d := &p.d[i]
		if !d.hasVar {
			continue
		}
		v, ok, over := substitute(d.val, 0, func(name string, _ int) (string, bool) { return own.get(name) })
		overLimit = overLimit || over
		d.hasVar = false
		if !ok {
			d.val = "" // invalid at computed-value time: inherited or initial
			continue
		}
		d.val = collapseSpace(strings.ToLower(v))
		switch i {
		case propFontSize:
			if k := fontSizeKind(d.val); k == fontUnset {
				if s := fontShorthandSize(d.val); s != "" {
					d.val = s
				}
			}
		}
	}
	return own, overLimit
}

// substitute replaces the var() references in v, looking names up with
// lookup; ok is false when one cannot be resolved, over when a bound was
// reached.
func substitute(v string, depth int, lookup func(name string, depth int) (string, bool)) (out string, ok, over bool) {
	if depth > maxVarDepth {
		return "", false, true
	}
	lower := strings.ToLower(v)
	if !strings.Contains(lower, "var(") {
		return v, true, false
	}
	var b strings.Builder
	for {
		k := strings.Index(lower, "var(")
		if k < 0 {
			b.WriteString(v)
			break
		}
		b.WriteString(v[:k])
		end := closingOf(v, k+3)
		if end < 0 {
			return "", false, false
		}
		inner := v[k+4 : end]
		name, fallback, hasFallback := strings.Cut(inner, ",")
		name = strings.TrimSpace(name)
		val, found := "", false
		if strings.HasPrefix(name, "--") {
			val, found = lookup(name, depth+1)
		}
		if !found {
			if !hasFallback {
				return "", false, false
			}
			var fok, fover bool
			val, fok, fover = substitute(strings.TrimSpace(fallback), depth+1, lookup)
			if fover {
				return "", false, true
			}
			if !fok {
				return "", false, false
			}
		}
		b.WriteString(val)
		if b.Len() > maxCustomBytes {
			return "", false, true
		}
		v, lower = v[end+1:], lower[end+1:]
	}
	return b.String(), true, false
}
