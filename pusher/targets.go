package pusher

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// Targets are the hosts a server may push to. Three rules decide, in
// this order:
//
//  1. The cloud metadata endpoints are never targets unless the
//     --push-allow list names them exactly (the address itself, or a CIDR
//     inside the refused range; a wider CIDR such as 0.0.0.0/0 does not
//     name them): link-local 169.254.0.0/16 and fe80::/10 (and link-local
//     multicast), fd00:ec2::254 (AWS over IPv6), fd20:ce::254 (Google
//     Cloud over IPv6), 100.100.100.200 (Alibaba Cloud), 168.63.129.16
//     (Azure's WireServer), the unspecified 0.0.0.0/8 and :: (which reach
//     this host), and the names metadata.google.internal, metadata and
//     metadata.goog.
//     An IPv6 address that carries an IPv4 one is judged by that one too
//     (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, SIIT
//     ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96 and the local-use 64:ff9b:1::/48
//     in each layout of RFC 6052, 6to4 2002::/16), and a URL's host in any
//     spelling inet_aton reads (127.1, 2130706433, 0x7f000001, 0177.0.0.1)
//     as the address it spells: glibc's resolver dials those.
//  2. The server's own listen addresses (its HTTP API and beanstalkd
//     ports, [Targets.Serving]) are never targets unless the list names
//     the address or the host exactly: a push into the server's own API
//     would act with the server's rights.
//  3. With a list, a host is a target if the list names it (a host name,
//     in any case, or an IP address) or its address is inside one of the
//     list's CIDRs; with none, every host is, unless the server listens
//     beyond loopback ([Targets.Serving]): then none is until --push-allow
//     names some.
//
// A policy's URL is checked when it is set ([Targets.Check]: a literal
// address, or a name, refused there answers 400 naming the rule), and
// every connection again once its name is resolved (the dialer's Control
// sees the address dialled), so that DNS cannot lead a push to a refused
// address (169.254.169.254.nip.io resolves to the metadata endpoint). A
// name the list allows may resolve to any address but a refused one; a
// name it does not list is allowed only where it resolves into one of
// its CIDRs.
//
// A nil *Targets allows every host but the metadata endpoints. Targets is
// immutable and safe for concurrent use; its checks cost time linear in
// the list.
type Targets struct {
	// names are the host names listed, lower case; nets the CIDRs and
	// addresses (as /32 or /128), unmapped.
	names map[string]bool
	nets  []netip.Prefix
	// closed is set when an empty list allows no host (a server beyond
	// loopback) rather than every host.
	closed bool
	// self are the server's own listen addresses; an unspecified address
	// in one stands for every address of this host (local) on its port.
	self  []netip.AddrPort
	local []netip.Addr
}

// ParseTargets parses a --push-allow list: host names, IP addresses and
// CIDRs separated by commas ("" allows every host but the metadata
// endpoints). It returns an error naming a bad entry.
func ParseTargets(list string) (*Targets, error) {
	t := &Targets{names: map[string]bool{}}
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("hourglass: push target %q: not a CIDR such as 10.0.0.0/8", e)
			}
			t.nets = append(t.nets, netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				a = a.Unmap().WithZone("")
				t.nets = append(t.nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			if strings.ContainsAny(e, ":@ ") {
				return nil, fmt.Errorf("hourglass: push target %q: give a host name, an IP address or a CIDR, without a scheme or port", e)
			}
			if a, ok := parseInetAton(e); ok {
				return nil, fmt.Errorf("hourglass: push target %q: write the address as %s", e, a)
			}
			t.names[canonicalHost(e)] = true
		}
	}
	return t, nil
}

// unmappedBits returns the prefix length of p once its address is
// unmapped (::ffff:10.0.0.0/104 is 10.0.0.0/8).
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// Serving returns a copy of t for a server whose listen addresses
// ("host:port": its HTTP API's, its beanstalkd protocol's) are listen:
// never targets unless the list names them, and, when the server listens
// beyond loopback (loopback false), an empty list allows no host rather
// than every one. A listen address whose host is a name is resolved
// (within a second); one that is unspecified (":7070", "0.0.0.0:7070")
// stands for every address of this host on its port.
func (t *Targets) Serving(loopback bool, listen ...string) *Targets {
	c := &Targets{names: map[string]bool{}}
	if t != nil {
		c.names, c.nets = t.names, t.nets
	}
	c.closed = !loopback
	for _, l := range listen {
		host, portStr, err := net.SplitHostPort(l)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || port == 0 {
			continue
		}
		addrs := []netip.Addr{netip.IPv4Unspecified()}
		if host != "" {
			if a, err := netip.ParseAddr(host); err == nil {
				addrs = []netip.Addr{a}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
				cancel()
			}
		}
		for _, a := range addrs {
			a = a.Unmap().WithZone("")
			if a.IsUnspecified() && c.local == nil {
				c.local = localAddrs()
			}
			c.self = append(c.self, netip.AddrPortFrom(a, uint16(port)))
		}
	}
	return c
}

// localAddrs returns the addresses of this host's interfaces.
func localAddrs() []netip.Addr {
	out := []netip.Addr{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// Rule says in a few words which hosts t allows: start-up logs it.
func (t *Targets) Rule() string {
	switch {
	case t.listed():
		var entries []string
		for n := range t.names {
			entries = append(entries, n)
		}
		slices.Sort(entries)
		for _, p := range t.nets {
			if p.IsSingleIP() {
				entries = append(entries, p.Addr().String())
			} else {
				entries = append(entries, p.String())
			}
		}
		return "only the hosts --push-allow names: " + strings.Join(entries, ", ")
	case t != nil && t.closed:
		return "none: this server listens beyond loopback and --push-allow names no host"
	}
	return "any host but the cloud metadata endpoints and this server's own addresses (no --push-allow)"
}

// listed reports whether t has a --push-allow list.
func (t *Targets) listed() bool { return t != nil && (len(t.names) > 0 || len(t.nets) > 0) }

// open reports whether t allows every host but the refused ones.
func (t *Targets) open() bool { return !t.listed() && (t == nil || !t.closed) }

// metadataNames are the cloud metadata endpoints' host names (Google
// Cloud's, and the short forms its resolvers answer too).
var metadataNames = map[string]bool{
	"metadata.google.internal": true,
	"metadata":                 true,
	"metadata.goog":            true,
}

// A refusedNet is a range of addresses that are never push targets
// unless the list names them.
type refusedNet struct {
	p   netip.Prefix
	why string
	// zeros is set for a range that holds the all-zero IPv4 address:
	// not judged against an address guessed from a layout of
	// 64:ff9b:1::/48 whose IPv4 bytes are mostly zero in every address.
	zeros bool
}

// refusedNets are the metadata endpoints' ranges and the addresses that
// reach this host unnamed.
var refusedNets = []refusedNet{
	{p: netip.MustParsePrefix("169.254.0.0/16"), why: "link-local: cloud metadata"},
	{p: netip.MustParsePrefix("fe80::/10"), why: "link-local"},
	{p: netip.MustParsePrefix("224.0.0.0/24"), why: "link-local multicast"},
	{p: netip.MustParsePrefix("ff02::/16"), why: "link-local multicast"},
	{p: netip.MustParsePrefix("fd00:ec2::254/128"), why: "AWS metadata over IPv6"},
	{p: netip.MustParsePrefix("fd20:ce::254/128"), why: "Google Cloud metadata over IPv6"},
	{p: netip.MustParsePrefix("100.100.100.200/32"), why: "Alibaba Cloud metadata"},
	{p: netip.MustParsePrefix("168.63.129.16/32"), why: "Azure WireServer"},
	{p: netip.MustParsePrefix("0.0.0.0/8"), why: "unspecified: this host", zeros: true},
	{p: netip.MustParsePrefix("::/128"), why: "unspecified: this host"},
}

// Prefixes whose addresses carry an IPv4 address.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64L    = netip.MustParsePrefix("64:ff9b:1::/48")
	compat    = netip.MustParsePrefix("::/96")
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// embedded returns the IPv4 addresses an IPv6 address a carries (a
// unmapped), each with whether it is certain (false: one layout of
// 64:ff9b:1::/48 among several, RFC 6052 §2.2).
func embedded(a netip.Addr) (v4 []netip.Addr, certain []bool) {
	if !a.Is6() {
		return nil, nil
	}
	b := a.As16()
	at := func(i ...int) netip.Addr { return netip.AddrFrom4([4]byte{b[i[0]], b[i[1]], b[i[2]], b[i[3]]}) }
	switch {
	case nat64.Contains(a), siit.Contains(a):
		return []netip.Addr{at(12, 13, 14, 15)}, []bool{true}
	case compat.Contains(a):
		if a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
			return nil, nil
		}
		return []netip.Addr{at(12, 13, 14, 15)}, []bool{true}
	case sixToFour.Contains(a):
		return []netip.Addr{at(2, 3, 4, 5)}, []bool{true}
	case nat64L.Contains(a):
		// /48: bytes 6-7 and 9-10; /56: 7 and 9-11; /64: 9-12; /96: 12-15
		// (byte 8 is always zero).
		return []netip.Addr{at(12, 13, 14, 15), at(9, 10, 11, 12), at(7, 9, 10, 11), at(6, 7, 9, 10)},
			[]bool{false, false, false, false}
	}
	return nil, nil
}

// refusal returns why a (any zone dropped, unmapped) is never a target
// unless the list names it exactly, or "" if it may be one.
func (t *Targets) refusal(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if why := t.refusedAs(a, true); why != "" {
		return why
	}
	v4, certain := embedded(a)
	for i, e := range v4 {
		if why := t.refusedAs(e, certain[i]); why != "" {
			if t.namesExactly(a) {
				return ""
			}
			return fmt.Sprintf("%s, as %s", why, e)
		}
	}
	return ""
}

// refusedAs returns the rule a falls under ("in 169.254.0.0/16
// (link-local: cloud metadata)"), or "" if none, or if the list names a
// within its range.
func (t *Targets) refusedAs(a netip.Addr, certain bool) string {
	for _, r := range refusedNets {
		if !r.p.Contains(a) || !certain && r.zeros {
			continue
		}
		if t.namesWithin(a, r.p) {
			return ""
		}
		return fmt.Sprintf("in %s (%s)", r.p, r.why)
	}
	return ""
}

// namesWithin reports whether the list holds a or a CIDR around it
// inside within: a name for a refused address as exact as its range.
func (t *Targets) namesWithin(a netip.Addr, within netip.Prefix) bool {
	if t == nil {
		return false
	}
	for _, p := range t.nets {
		if p.Contains(a) && p.Bits() >= within.Bits() && within.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// namesExactly reports whether the list holds the address a itself.
func (t *Targets) namesExactly(a netip.Addr) bool {
	return t.namesWithin(a, netip.PrefixFrom(a, a.BitLen()))
}

// isSelf reports whether ap is one of the server's listen addresses.
func (t *Targets) isSelf(ap netip.AddrPort) bool {
	if t == nil {
		return false
	}
	a := ap.Addr().Unmap().WithZone("")
	for _, s := range t.self {
		if s.Port() != ap.Port() {
			continue
		}
		if s.Addr() == a || s.Addr().IsUnspecified() && (a.IsLoopback() || slices.Contains(t.local, a)) {
			return true
		}
	}
	return false
}

// inNets reports whether a is inside one of t's CIDRs.
func (t *Targets) inNets(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range t.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// canonicalHost returns host in lower case without a trailing dot.
func canonicalHost(host string) string { return strings.ToLower(strings.TrimSuffix(host, ".")) }

// hostAddr returns the address a URL's host spells, in any form the
// resolvers read as one: netip's, or inet_aton's (glibc's getaddrinfo
// reads 127.1, 2130706433, 0x7f000001 and 0177.0.0.1 as 127.0.0.1).
func hostAddr(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone(""), true
	}
	return parseInetAton(host)
}

// parseInetAton parses s as inet_aton(3) does: one to four parts
// separated by dots, each decimal, octal (a leading 0) or hexadecimal
// (0x), the last filling the bytes left.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v [4]uint64
	for i, p := range parts {
		base := 10
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			p, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		v[i] = n
	}
	last := len(parts) - 1
	var out uint64
	for i := range last {
		if v[i] > 0xff {
			return netip.Addr{}, false
		}
		out |= v[i] << (24 - 8*i)
	}
	if v[last] >= 1<<(32-8*last) {
		return netip.Addr{}, false
	}
	out |= v[last]
	return netip.AddrFrom4([4]byte{byte(out >> 24), byte(out >> 16), byte(out >> 8), byte(out)}), true
}

// defaultPort returns the port of a URL of scheme without one.
func defaultPort(scheme string) uint16 {
	if strings.EqualFold(scheme, "https") {
		return 443
	}
	return 80
}

// Check returns an error wrapping task.ErrInvalid, naming the rule, if
// rawURL, a policy's push URL, names a host the server may not push to:
// a metadata endpoint (a literal address in any spelling, or one of the
// names), the server's own address, or one the rules of t leave out (an
// address, or a name neither listed nor possibly resolving into one of
// the list's CIDRs). A URL that does not parse is left to
// service.CheckPush. Its cost is linear in the list.
func (t *Targets) Check(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	host := canonicalHost(u.Hostname())
	if host == "" {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: policy: push.url: host %q %s", task.ErrInvalid, u.Hostname(), fmt.Sprintf(format, args...))
	}
	port := defaultPort(u.Scheme)
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		port = uint16(p)
	}
	if a, ok := hostAddr(host); ok {
		if why := t.refusal(a); why != "" {
			return bad("is a cloud metadata endpoint or this host (%s): never a push target unless --push-allow names it", why)
		}
		if t.isSelf(netip.AddrPortFrom(a, port)) && !t.namesExactly(a) {
			return bad("port %d is this server's own address: never a push target unless --push-allow names it", port)
		}
		if !t.open() && !t.inNets(a) {
			return bad("%s", t.outside())
		}
		return nil
	}
	if metadataNames[host] && (t == nil || !t.names[host]) {
		return bad("is a cloud metadata endpoint: never a push target unless --push-allow names it")
	}
	if !t.open() && !t.names[host] && len(t.nets) == 0 {
		return bad("%s", t.outside())
	}
	return nil
}

// outside says why a host not listed is refused by a list or a closed t.
func (t *Targets) outside() string {
	if !t.listed() {
		return "is refused: this server listens beyond loopback and pushes only to the hosts --push-allow names; set --push-allow"
	}
	return "is not in the server's --push-allow list"
}

// checkDial returns an error if a push to host (as the URL names it) may
// not connect to addr, one of the addresses host resolved to: the
// check of the dialer's Control, after resolution.
func (t *Targets) checkDial(host string, addr netip.AddrPort) error {
	host = canonicalHost(strings.Trim(host, "[]"))
	named := t != nil && t.names[host]
	a := addr.Addr().Unmap().WithZone("")
	why := t.refusal(a)
	switch {
	case metadataNames[host] && !named:
		return fmt.Errorf("push target %s is a cloud metadata endpoint: refused", host)
	case why != "":
		return fmt.Errorf("push target %s (%s) is %s: refused", a, host, why)
	case t.isSelf(netip.AddrPortFrom(a, addr.Port())) && !named && !t.namesExactly(a):
		return fmt.Errorf("push target %s (%s) is this server's own address: refused", addr, host)
	case !t.open() && !named && !t.inNets(a):
		if !t.listed() {
			return fmt.Errorf("push target %s (%s): this server pushes only to the hosts --push-allow names, and it names none", a, host)
		}
		return fmt.Errorf("push target %s (%s) is not in --push-allow", a, host)
	}
	return nil
}

// echoes reports whether a failed answer's body from host (a URL's),
// or the error of a connection to it, may be kept in its task's last
// error, which any caller of the API reads: on a server with no list and on loopback, whose callers reach
// every target themselves, and for a host the list names exactly (a
// name, or an address); not for one reached through a CIDR, which would
// let the API's callers read any service of that network, or tell an
// open port from a closed one and a name that exists from one that does
// not.
func (t *Targets) echoes(host string) bool {
	if t.open() {
		return true
	}
	host = canonicalHost(host)
	if a, ok := hostAddr(host); ok {
		return t.namesExactly(a)
	}
	return t.names[host]
}

// dialer returns the function a push's transport dials with: it dials
// addr ("host:port") with d, checking each address the host resolves to
// before connecting to it (Control), so that a refused address is never
// connected to whatever DNS answers.
func (t *Targets) dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		dd := *d
		dd.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return refusedError{fmt.Errorf("push target %s: %v", address, err)}
			}
			if err := t.checkDial(host, ap); err != nil {
				return refusedError{err}
			}
			return nil
		}
		return dd.DialContext(ctx, network, addr)
	}
}

// refusedError is a connection the checks refused: its reason is the
// server's rule, which a task's last error shows whatever the target.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }
func (e refusedError) Unwrap() error { return e.err }

// newDialer returns the dialer of pushes: a connection's timeout within
// each push's, and TCP keep-alive for the pooled connections.
func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}
