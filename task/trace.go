package task

import "strings"

// Trace is the W3C Trace Context (https://www.w3.org/TR/trace-context/) a
// task was put with: the producer's traceparent and tracestate, kept with
// the task and handed on unchanged with every delivery (a reserve's
// answer, a push's request headers), so that a worker continues the
// producer's trace; each retry carries the same parent. The zero Trace
// is none.
type Trace struct {
	Parent string // traceparent: "00-<32 hex>-<16 hex>-<2 hex>"
	State  string // tracestate: vendors' list-members, at most MaxTraceState bytes
}

// Bounds of a Trace. A traceparent of version 00 is exactly
// TraceParentLen bytes; one of a later version may be longer (the spec
// lets versions append fields after a "-") up to MaxTraceParent. A
// tracestate holds at most MaxTraceMembers list-members in
// MaxTraceState bytes, as the spec bounds it.
const (
	TraceParentLen  = 2 + 1 + 32 + 1 + 16 + 1 + 2 // 55
	MaxTraceParent  = 256
	MaxTraceState   = 512
	MaxTraceMembers = 32
)

// Clean returns t as it is kept: the zero Trace when t.Parent is not a
// valid traceparent, and t without its State when that is not a valid
// tracestate. A malformed trace context is dropped rather than refused,
// as the W3C recommendation has a receiver do: a put never fails for
// it. It takes O(len(t.Parent) + len(t.State)).
func (t Trace) Clean() Trace {
	if !ValidTraceParent(t.Parent) {
		return Trace{}
	}
	if !ValidTraceState(t.State) {
		t.State = ""
	}
	return t
}

// ValidTraceParent reports whether s is a traceparent header as the W3C
// Trace Context defines it: version, trace-id, parent-id and flags in
// lower-case hex, neither id all zeros, version ff invalid; version 00
// exactly 55 bytes, a later one at least that, with "-" after the flags
// when longer, and at most MaxTraceParent bytes.
func ValidTraceParent(s string) bool {
	if len(s) < TraceParentLen || len(s) > MaxTraceParent {
		return false
	}
	if !lowerHex(s[0:2]) || s[0:2] == "ff" || s[2] != '-' ||
		!lowerHex(s[3:35]) || s[35] != '-' ||
		!lowerHex(s[36:52]) || s[52] != '-' ||
		!lowerHex(s[53:55]) {
		return false
	}
	if s[3:35] == "00000000000000000000000000000000" || s[36:52] == "0000000000000000" {
		return false
	}
	if s[0:2] == "00" {
		return len(s) == TraceParentLen
	}
	if len(s) == TraceParentLen {
		return true
	}
	if s[TraceParentLen] != '-' {
		return false
	}
	for i := TraceParentLen; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// ValidTraceState reports whether s is a tracestate header as the W3C
// Trace Context defines it: at most MaxTraceState bytes, a comma-separated
// list of at most MaxTraceMembers key=value members (empty ones allowed,
// spaces and tabs around each), keys lower-case "vendor" or
// "tenant@vendor", each key once, values printable ASCII without "," and
// "=" and not ending in a space. "" is valid (none).
func ValidTraceState(s string) bool {
	if len(s) > MaxTraceState {
		return false
	}
	var keys [MaxTraceMembers]string
	n := 0
	for m := range strings.SplitSeq(s, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		k, v, ok := strings.Cut(m, "=")
		if !ok || !traceKey(k) || !traceValue(v) || n == MaxTraceMembers {
			return false
		}
		for _, seen := range keys[:n] {
			if seen == k {
				return false
			}
		}
		keys[n] = k
		n++
	}
	return true
}

// traceKey reports whether k is a tracestate key: simple-key, or
// tenant-id "@" system-id.
func traceKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return len(k) <= 256 && k != "" && k[0] >= 'a' && k[0] <= 'z' && keyChars(k[1:])
	}
	return len(tenant) >= 1 && len(tenant) <= 241 && (lowerAlpha(tenant[0]) || digit(tenant[0])) && keyChars(tenant[1:]) &&
		len(system) >= 1 && len(system) <= 14 && lowerAlpha(system[0]) && keyChars(system[1:])
}

// keyChars reports whether every byte of s may follow a key's first.
func keyChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !lowerAlpha(c) && !digit(c) && c != '_' && c != '-' && c != '*' && c != '/' {
			return false
		}
	}
	return true
}

// traceValue reports whether v is a tracestate value: 1 to 256 printable
// ASCII bytes other than "," and "=", the last not a space.
func traceValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c > '~' || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !digit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func lowerAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func digit(c byte) bool      { return c >= '0' && c <= '9' }
