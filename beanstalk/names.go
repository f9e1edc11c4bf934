package beanstalk

import "strings"

// Tube names and queue names.
//
// A tube name is 1 to 200 of [A-Za-z0-9] and "-+/;.$_()", not starting
// with '-'; a broker queue name is 1 to 200 of [A-Za-z0-9._-], not "."
// or "..". A tube whose name has only queue characters is the queue of
// the same name, so "emails" is "emails" over HTTP too. A tube name with
// any of "+/;$()", and the tubes "." and "..", are the queue named '-'
// followed by the tube name escaped with '_':
//
//	_ -> __   + -> _p   / -> _s   ; -> _c   $ -> _d   ( -> _l   ) -> _r
//
// so "app/mail" is the queue "-app_smail", "a_b(1)" is "-a__b_l1_r" and
// "." is "-.".
// The two ranges cannot meet, since no tube name starts with '-'. A
// queue whose name starts with '-' and is not such an escape (made over
// HTTP) has no tube name: list-tubes leaves it out. A tube name whose
// escape is over 200 bytes has no queue; commands naming it are answered
// BAD_FORMAT.

// queueName returns the queue of tube, and false when tube's escape is
// too long.
func queueName(tube string) (string, bool) {
	if !escaped(tube) {
		return tube, true
	}
	var b strings.Builder
	b.WriteByte('-')
	for i := 0; i < len(tube); i++ {
		c := tube[i]
		if e := escapeOf(c); e != 0 {
			b.WriteByte('_')
			b.WriteByte(e)
		} else {
			b.WriteByte(c)
		}
	}
	if b.Len() > maxTubeName {
		return "", false
	}
	return b.String(), true
}

// tubeName returns the tube whose queue is queue, and false when there is
// none.
func tubeName(queue string) (string, bool) {
	if !strings.HasPrefix(queue, "-") {
		return queue, queue != ""
	}
	var b strings.Builder
	for i := 1; i < len(queue); i++ {
		c := queue[i]
		if c != '_' {
			if !nameChar(c) || escapeOf(c) != 0 {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(queue) {
			return "", false
		}
		u := unescape(queue[i])
		if u == 0 {
			return "", false
		}
		b.WriteByte(u)
	}
	t := b.String()
	if !escaped(t) || !validTube([]byte(t)) {
		return "", false // not what queueName makes of any tube
	}
	return t, true
}

// escaped reports whether tube's queue is its escape.
func escaped(tube string) bool {
	return strings.ContainsAny(tube, "+/;$()") || tube == "." || tube == ".."
}

// escapeOf returns the letter that follows '_' in the escape of c, or 0
// when c stands for itself.
func escapeOf(c byte) byte {
	switch c {
	case '_':
		return '_'
	case '+':
		return 'p'
	case '/':
		return 's'
	case ';':
		return 'c'
	case '$':
		return 'd'
	case '(':
		return 'l'
	case ')':
		return 'r'
	}
	return 0
}

// unescape is the inverse of escapeOf, 0 for a letter that escapes
// nothing.
func unescape(e byte) byte {
	switch e {
	case '_':
		return '_'
	case 'p':
		return '+'
	case 's':
		return '/'
	case 'c':
		return ';'
	case 'd':
		return '$'
	case 'l':
		return '('
	case 'r':
		return ')'
	}
	return 0
}
