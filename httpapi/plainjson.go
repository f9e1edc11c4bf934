package httpapi

// scanner reads by hand the plain JSON forms that acksjson.go and
// putsjson.go take (printable ASCII strings without escapes, and the
// punctuation between them), s from i on; anything else makes its reads
// fail, and the caller leaves the body to encoding/json. T is string for
// the acks, whose strings are substrings of one copy of the body, and
// []byte for the puts, whose values are copied out of it.
type scanner[T string | []byte] struct {
	s T
	i int
}

// space skips JSON white space.
func (p *scanner[T]) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek reports whether c comes next, after white space.
func (p *scanner[T]) peek(c byte) bool {
	p.space()
	return p.i < len(p.s) && p.s[p.i] == c
}

// byte reads c, after white space.
func (p *scanner[T]) byte(c byte) bool {
	if !p.peek(c) {
		return false
	}
	p.i++
	return true
}

// quoted reads a string of printable ASCII without escapes, after white
// space, and returns it with its quotes.
func (p *scanner[T]) quoted() (T, bool) {
	var none T
	if !p.peek('"') {
		return none, false
	}
	start := p.i
	for p.i++; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return p.s[start:p.i], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return none, false
		}
	}
	return none, false
}

// str is quoted without the quotes.
func (p *scanner[T]) str() (T, bool) {
	q, ok := p.quoted()
	if !ok {
		return q, false
	}
	return q[1 : len(q)-1], true
}

// key reads "name" and a colon.
func (p *scanner[T]) key(name string) bool {
	k, ok := p.str()
	return ok && string(k) == name && p.byte(':')
}

// end reports whether nothing but white space is left.
func (p *scanner[T]) end() bool {
	p.space()
	return p.i == len(p.s)
}

// count counts c in the rest of s, up to max+1: a guess at the number of
// objects to come, for a slice's capacity.
func (p *scanner[T]) count(c byte, max int) int {
	n := 0
	for i := p.i; i < len(p.s) && n <= max; i++ {
		if p.s[i] == c {
			n++
		}
	}
	return n
}

// plainList reads {"key":[item, …]} and then nothing but white space, each item
// with item, and reports whether s was that whole. max (the most items
// allowed) only bounds the capacity guessed for the slice.
func plainList[T string | []byte, E any](p *scanner[T], key string, max int, item func() (E, bool)) ([]E, bool) {
	if !p.byte('{') || !p.key(key) || !p.byte('[') {
		return nil, false
	}
	out := make([]E, 0, p.count('{', max))
	if !p.peek(']') {
		for {
			e, ok := item()
			if !ok {
				return nil, false
			}
			out = append(out, e)
			if p.peek(']') {
				break
			}
			if !p.byte(',') {
				return nil, false
			}
		}
	}
	if !p.byte(']') || !p.byte('}') {
		return nil, false
	}
	return out, p.end()
}
