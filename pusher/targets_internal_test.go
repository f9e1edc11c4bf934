package pusher

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestTargets_CheckDial checks the addresses a name resolved to, as the
// dialer's Control sees them: a name resolving to a metadata endpoint
// (169.254.169.254.nip.io) in any form, to the server's own address, or
// outside the list is refused; the metadata names whatever they resolve
// to.
func TestTargets_CheckDial(t *testing.T) {
	parse := func(list string) *Targets {
		t.Helper()
		tg, err := ParseTargets(list)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	open := parse("").Serving(true, "127.0.0.1:7070")
	list := parse("app.internal, 10.0.0.0/8")
	beyond := parse("").Serving(false, "10.0.0.5:7070")
	for _, tc := range []struct {
		targets *Targets
		host    string
		addr    string
		want    string // "" for allowed
	}{
		{open, "169.254.169.254.nip.io", "169.254.169.254:80", "169.254.0.0/16"},
		{nil, "169.254.169.254.nip.io", "169.254.169.254:80", "169.254.0.0/16"},
		{open, "evil.example", "[::ffff:169.254.169.254]:80", "169.254.0.0/16"},
		{open, "evil.example", "[64:ff9b::a9fe:a9fe]:80", "169.254.0.0/16"},
		{open, "evil.example", "[fd00:ec2::254]:80", "AWS"},
		{open, "evil.example", "100.100.100.200:80", "Alibaba"},
		{open, "evil.example", "0.0.0.0:80", "unspecified"},
		{open, "evil.example", "[::]:80", "unspecified"},
		{open, "evil.example", "[fe80::1%lo]:80", "link-local"},
		{open, "metadata.google.internal", "10.0.0.1:80", "metadata"},
		{open, "Metadata.", "10.0.0.1:80", "metadata"},
		{open, "2130706433", "127.0.0.1:7070", "own address"}, // glibc's reading
		{open, "localhost", "127.0.0.1:7070", "own address"},
		{open, "localhost", "[::ffff:127.0.0.1]:7070", "own address"},
		{open, "localhost", "127.0.0.1:8080", ""},
		{open, "example.com", "93.184.215.14:443", ""},
		{list, "app.internal", "127.0.0.1:80", ""},
		{list, "app.internal", "169.254.169.254:80", "169.254.0.0/16"},
		{list, "other.internal", "10.1.1.1:80", ""},
		{list, "other.internal", "127.0.0.1:80", "not in --push-allow"},
		{beyond, "10.0.0.1", "10.0.0.1:80", "names none"},
		{beyond, "app.internal", "10.0.0.1:80", "names none"},
	} {
		err := tc.targets.checkDial(tc.host, netip.MustParseAddrPort(tc.addr))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: checkDial(%s, %s) = %v, want allowed", tc.targets.Rule(), tc.host, tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: checkDial(%s, %s) = %v, want a refusal naming %q", tc.targets.Rule(), tc.host, tc.addr, err, tc.want)
		}
	}
}

// TestTargets_Dialer dials through the checks: a name that resolves to
// the server's own address is refused before any connection, another
// port of the same host connects.
func TestTargets_Dialer(t *testing.T) {
	self := listen(t)
	other := listen(t)
	tg := (*Targets)(nil).Serving(true, self.Addr().String())
	dial := tg.dialer(&net.Dialer{Timeout: 10 * time.Second})
	_, selfPort, _ := net.SplitHostPort(self.Addr().String())
	_, otherPort, _ := net.SplitHostPort(other.Addr().String())
	if c, err := dial(context.Background(), "tcp", "localhost:"+selfPort); err == nil || !strings.Contains(err.Error(), "own address") {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial localhost:%s, the server's own port: %v, want refused", selfPort, err)
	}
	c, err := dial(context.Background(), "tcp", "localhost:"+otherPort)
	if err != nil {
		t.Fatalf("dial localhost:%s: %v", otherPort, err)
	}
	c.Close()
}

// TestTargets_Echoes keeps a failed answer's body in the last error for
// the hosts a list names exactly, and on a server with none on
// loopback, never for one reached through a CIDR or beyond loopback
// unnamed.
func TestTargets_Echoes(t *testing.T) {
	list, _ := ParseTargets("app.internal, 10.0.0.0/8, 192.168.1.1")
	open, _ := ParseTargets("")
	for _, tc := range []struct {
		targets *Targets
		host    string
		want    bool
	}{
		{nil, "10.0.0.1", true},
		{open.Serving(true, "127.0.0.1:7070"), "127.0.0.1", true},
		{open.Serving(false, "10.0.0.5:7070"), "10.0.0.1", false},
		{list, "APP.internal.", true},
		{list, "192.168.1.1", true},
		{list, "10.0.0.1", false},
		{list, "other.internal", false},
	} {
		if got := tc.targets.echoes(tc.host); got != tc.want {
			t.Errorf("%s: echoes(%s) = %v, want %v", tc.targets.Rule(), tc.host, got, tc.want)
		}
	}
}

// TestParseInetAton reads every form inet_aton(3) reads, and nothing
// else.
func TestParseInetAton(t *testing.T) {
	for in, want := range map[string]string{
		"127.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"127.000.000.001": "127.0.0.1", "0X7F.1": "127.0.0.1", "10.1.257": "10.1.1.1", "0": "0.0.0.0",
		"4294967295": "255.255.255.255", "1.2.3.4": "1.2.3.4",
	} {
		if a, ok := parseInetAton(in); !ok || a.String() != want {
			t.Errorf("parseInetAton(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"", "4294967296", "1.2.3.4.5", "256.1", "1.2.65536", "08", "0x", "1..2", "a.b", "example.com", "-1", "+1", "1_0"} {
		if a, ok := parseInetAton(in); ok {
			t.Errorf("parseInetAton(%q) = %v, want no address", in, a)
		}
	}
}

// TestSanitize replaces control characters but tab in an echoed body.
func TestSanitize(t *testing.T) {
	if got := sanitize([]byte("a\r\nb\x1b[31m\tc\x7fé")); got != "a  b [31m\tc é" {
		t.Errorf("sanitize: %q", got)
	}
}

// fakeDNS is a DNS server on loopback (UDP) that answers every A query
// with the address its map gives the name (no answer for other names
// and other types): the resolver's answers, without a network.
func fakeDNS(t *testing.T, answers map[string]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			if len(q) < 12 {
				continue
			}
			// The question: labels from byte 12, then type and class.
			var labels []string
			i := 12
			for i < len(q) && q[i] != 0 {
				l := int(q[i])
				if i+1+l > len(q) {
					break
				}
				labels = append(labels, string(q[i+1:i+1+l]))
				i += 1 + l
			}
			if i+5 > len(q) {
				continue
			}
			qtype := int(q[i+1])<<8 | int(q[i+2])
			question := q[12 : i+5]
			a, ok := answers[strings.ToLower(strings.Join(labels, "."))]
			resp := []byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}
			resp = append(resp, question...)
			if ok && qtype == 1 {
				resp[7] = 1
				ip := a.As4()
				resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ip[0], ip[1], ip[2], ip[3])
			}
			pc.WriteTo(resp, from)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// TestTargets_DialResolved dials names through a resolver whose answers
// the test gives: a name resolving to a metadata endpoint
// (169.254.169.254.nip.io) or to the server's own address is refused
// before any connection, whatever the URL's host looked like.
func TestTargets_DialResolved(t *testing.T) {
	self := listen(t)
	other := listen(t)
	r := fakeDNS(t, map[string]netip.Addr{
		"169.254.169.254.nip.io": netip.MustParseAddr("169.254.169.254"),
		"alibaba.example":        netip.MustParseAddr("100.100.100.200"),
		"self.example":           netip.MustParseAddr("127.0.0.1"),
	})
	_, selfPort, _ := net.SplitHostPort(self.Addr().String())
	_, otherPort, _ := net.SplitHostPort(other.Addr().String())
	open, _ := ParseTargets("")
	dial := open.Serving(true, self.Addr().String()).dialer(&net.Dialer{Timeout: 10 * time.Second, Resolver: r})
	for _, tc := range []struct{ addr, want string }{
		{"169.254.169.254.nip.io:80", "169.254.0.0/16"},
		{"alibaba.example:80", "100.100.100.200"},
		{"self.example:" + selfPort, "own address"},
		{"self.example:" + otherPort, ""},
	} {
		c, err := dial(context.Background(), "tcp", tc.addr)
		if c != nil {
			c.Close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("dial %s: %v", tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("dial %s: %v, want a refusal naming %q", tc.addr, err, tc.want)
		}
	}
}

// listen returns a listener on a free loopback port, closed when the
// test ends: a target that accepts connections and answers nothing.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
