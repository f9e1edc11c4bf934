package pusher

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// Targets are the hosts a server may push to: `hourglass serve
// --push-allow LIST`. An empty list allows any host; a list allows a
// host named in it (an exact name, in any case, or an IP address) and
// any address inside one of its CIDRs. Link-local addresses
// (169.254.0.0/16 and fe80::/10, where clouds serve instance metadata,
// IPv4-mapped ones included) are refused whatever the list.
//
// A policy's URL is checked when it is set (Check: a literal address,
// or a name, refused there answers 400), and every connection again
// once its name is resolved (the dialer's Control sees the address
// dialled), so that DNS cannot lead a push to a refused address. A name
// the list allows may resolve to any address but a link-local one; a
// name it does not list is allowed only where it resolves into one of
// the list's CIDRs.
//
// Targets is immutable and safe for concurrent use.
type Targets struct {
	// names are the host names listed, lower case; nets the CIDRs and
	// addresses (as /32 or /128), unmapped.
	names map[string]bool
	nets  []netip.Prefix
}

// ParseTargets parses a --push-allow list: host names, IP addresses and
// CIDRs separated by commas ("" allows every host but link-local ones).
// It returns an error naming a bad entry.
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
				a = a.Unmap()
				t.nets = append(t.nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			if strings.ContainsAny(e, ":@ ") {
				return nil, fmt.Errorf("hourglass: push target %q: give a host name, an IP address or a CIDR, without a scheme or port", e)
			}
			t.names[strings.ToLower(strings.TrimSuffix(e, "."))] = true
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

// open reports whether t allows every host but link-local ones.
func (t *Targets) open() bool { return t == nil || len(t.names) == 0 && len(t.nets) == 0 }

// refused reports whether a is never a push target: link-local.
func refused(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()
}

// inNets reports whether a is inside one of t's CIDRs.
func (t *Targets) inNets(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check returns an error wrapping task.ErrInvalid if rawURL, a policy's
// push URL, names a host the server may not push to: a refused literal
// address, or with a list, an address outside it or a name it neither
// lists nor could resolve into one of its CIDRs. A URL that does not
// parse is left to service.CheckPush. Its cost is linear in the list.
func (t *Targets) Check(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: policy: push.url: host %q %s", task.ErrInvalid, u.Hostname(), why)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		switch {
		case refused(a):
			return bad("is link-local (cloud metadata): never a push target")
		case !t.open() && !t.inNets(a):
			return bad("is not in the server's --push-allow list")
		}
		return nil
	}
	if !t.open() && !t.names[host] && len(t.nets) == 0 {
		return bad("is not in the server's --push-allow list")
	}
	return nil
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
		named := t != nil && t.names[strings.ToLower(strings.TrimSuffix(host, "."))]
		dd := *d
		dd.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("push target %s: %v", address, err)
			}
			a := ap.Addr()
			switch {
			case refused(a):
				return fmt.Errorf("push target %s is link-local: refused", a)
			case !t.open() && !named && !t.inNets(a):
				return fmt.Errorf("push target %s (%s) is not in --push-allow", a, host)
			}
			return nil
		}
		return dd.DialContext(ctx, network, addr)
	}
}

// newDialer returns the dialer of pushes: a connection's timeout within
// each push's, and TCP keep-alive for the pooled connections.
func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}
