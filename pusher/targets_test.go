package pusher_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/task"
)

// metadataURLs are the cloud metadata endpoints and this host's
// unspecified addresses in every spelling a URL can give them: none is a
// push target on any server unless --push-allow names it.
var metadataURLs = []string{
	"http://169.254.169.254/latest/meta-data",
	"http://169.254.170.2/v2/credentials",
	"http://[fe80::1]/",
	"http://[fe80::1%25eth0]:80/",
	"http://[::ffff:169.254.169.254]/",
	"http://[::ffff:a9fe:a9fe]/",
	"http://[fd00:ec2::254]/",
	"http://[FD00:EC2:0:0:0:0:0:254]:80/",
	"http://100.100.100.200/latest/meta-data",
	"http://[fd20:ce::254]/computeMetadata/v1/",
	"http://168.63.129.16/machine?comp=goalstate",
	"http://[::ffff:100.100.100.200]/",
	"http://[64:ff9b::a9fe:a9fe]/",         // NAT64 of 169.254.169.254
	"http://[64:ff9b::169.254.169.254]/",   // the same, dotted
	"http://[64:ff9b::6464:64c8]/",         // NAT64 of 100.100.100.200
	"http://[64:ff9b:1::a9fe:a9fe]/",       // local-use NAT64, /96 layout
	"http://[64:ff9b:1:a9fe:a9:fe00::]/",   // local-use NAT64, /48 layout
	"http://[64:ff9b:1:a9:fe:a9fe::]/",     // local-use NAT64, /56 layout
	"http://[64:ff9b:1:0:a9:fea9:fe00:0]/", // local-use NAT64, /64 layout
	"http://[::169.254.169.254]/",          // IPv4-compatible
	"http://[::ffff:0:169.254.169.254]/",   // SIIT
	"http://[2002:a9fe:a9fe::1]/",          // 6to4
	"http://metadata.google.internal/computeMetadata/v1/",
	"http://METADATA.Google.Internal./",
	"http://metadata/",
	"http://metadata.goog/",
	"http://0.0.0.0:8080/",
	"http://0/",
	"http://0.1.2.3/",
	"http://[::]:8080/",
	"http://[::ffff:0.0.0.0]/",
	"http://2852039166/",          // 169.254.169.254 as one number
	"http://0xa9fea9fe/",          // in hexadecimal
	"http://0251.0376.0251.0376/", // in octal
	"http://0xA9.0xFE.0xA9.0xFE/",
	"http://169.254.43518/", // two parts
	"http://169.16689662/",
	"http://1684300999/", // 100.100.100.199: not it
}

// TestTargets_Metadata refuses the metadata endpoints in every spelling
// on a server with no list, with one, and with one naming every network,
// unless the list names the endpoint exactly.
func TestTargets_Metadata(t *testing.T) {
	open, _ := pusher.ParseTargets("")
	wide, _ := pusher.ParseTargets("0.0.0.0/0, ::/0, fd00::/8, 169.0.0.0/8")
	for _, targets := range []*pusher.Targets{nil, open, wide, open.Serving(true, "127.0.0.1:7070"), wide.Serving(false, "10.0.0.5:7070")} {
		for _, u := range metadataURLs {
			err := targets.Check(u)
			if u == "http://1684300999/" {
				if err != nil {
					t.Errorf("%s: Check(%s): %v", targets.Rule(), u, err)
				}
				continue
			}
			if err == nil || !errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), "push.url") || !strings.Contains(err.Error(), "metadata") {
				t.Errorf("%s: Check(%s) = %v, want a refusal naming the metadata rule", targets.Rule(), u, err)
			}
		}
	}
	for list, ok := range map[string][]string{
		"169.254.169.254":          {"http://169.254.169.254/", "http://[::ffff:169.254.169.254]/", "http://2852039166/"},
		"169.254.0.0/16":           {"http://169.254.169.254/", "http://169.254.170.2/"},
		"fd00:ec2::254":            {"http://[fd00:ec2::254]/"},
		"64:ff9b::a9fe:a9fe":       {"http://[64:ff9b::a9fe:a9fe]/"},
		"metadata.google.internal": {"http://metadata.google.internal/"},
		"100.100.100.200, 0.0.0.0": {"http://100.100.100.200/", "http://0.0.0.0/"},
	} {
		targets, err := pusher.ParseTargets(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ok {
			if err := targets.Check(u); err != nil {
				t.Errorf("--push-allow %s: Check(%s) = %v, want allowed", list, u, err)
			}
		}
		if err := targets.Check("http://169.254.1.1/"); err == nil && list != "169.254.0.0/16" {
			t.Errorf("--push-allow %s: 169.254.1.1 allowed", list)
		}
	}
}

// TestTargets_Check: with no list every host but the refused ones, with
// a list what it names; a server's own listen addresses are never
// targets unless named; beyond loopback, no host until --push-allow.
func TestTargets_Check(t *testing.T) {
	parse := func(list string) *pusher.Targets {
		t.Helper()
		tg, err := pusher.ParseTargets(list)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	open := parse("")
	list := parse("app.internal, 10.0.0.0/8, 127.0.0.1,::1")
	names := parse("app.internal")
	onLoopback := open.Serving(true, "127.0.0.1:7070", "127.0.0.1:11300")
	onEvery := open.Serving(true, ":7070")
	beyond := open.Serving(false, "10.0.0.5:7070")
	beyondList := parse("10.0.0.0/8").Serving(false, "10.0.0.5:7070")
	selfNamed := parse("127.0.0.1").Serving(true, "127.0.0.1:7070")
	for _, tc := range []struct {
		targets *pusher.Targets
		url     string
		want    string // "" for allowed, else a word of the refusal
	}{
		{open, "http://example.com/", ""},
		{open, "http://127.0.0.1:8080/", ""},
		{open, "http://127.1:8080/", ""},
		{open, "http://10.1.2.3/", ""},
		{open, "http://[64:ff9b:1::a00:1]/", ""}, // 10.0.0.1 over local-use NAT64
		{open, "http://[2001:db8::1]/", ""},
		{nil, "http://10.1.2.3/", ""},
		{list, "https://APP.internal./x", ""},
		{list, "http://10.9.9.9:99/", ""},
		{list, "http://012.9.9.9:99/", ""}, // 10.9.9.9 in octal
		{list, "http://127.0.0.1/", ""},
		{list, "http://127.0.0.2/", "--push-allow"},
		{list, "http://2130706434/", "--push-allow"},
		{list, "http://[::1]/", ""},
		{list, "http://other.internal/", ""}, // may resolve into 10.0.0.0/8: checked at the dial
		{names, "http://other.internal/", "--push-allow"},
		{names, "http://10.1.2.3/", "--push-allow"},
		{names, "http://app.internal/", ""},

		// The server's own API and beanstalkd ports, in every spelling.
		{onLoopback, "http://127.0.0.1:7070/v1/queues/own/tasks", "own address"},
		{onLoopback, "http://127.1:7070/", "own address"},
		{onLoopback, "http://2130706433:7070/", "own address"},
		{onLoopback, "http://0x7f000001:7070/", "own address"},
		{onLoopback, "http://0177.0.0.1:7070/", "own address"},
		{onLoopback, "http://[::ffff:127.0.0.1]:7070/", "own address"},
		{onLoopback, "http://127.0.0.1:11300/", "own address"},
		{onLoopback, "http://127.0.0.1:7071/", ""},
		{onLoopback, "http://127.0.0.2:7070/", ""}, // not the listener's address
		{onLoopback, "http://localhost:7070/", ""}, // a name: checked at the dial
		{onEvery, "http://127.0.0.2:7070/", "own address"},
		{onEvery, "http://[::1]:7070/", "own address"},
		{onEvery, "http://127.0.0.2:80/", ""},
		{selfNamed, "http://127.0.0.1:7070/", ""},

		// Beyond loopback: only what --push-allow names.
		{beyond, "http://10.0.0.1/", "set --push-allow"},
		{beyond, "http://127.0.0.1:8080/", "set --push-allow"},
		{beyond, "http://example.com/", "set --push-allow"},
		{beyondList, "http://10.0.0.6:7070/", ""},
		{beyondList, "http://10.0.0.5:8080/", ""},
		{beyondList, "http://10.0.0.5:7070/", "own address"},
		{beyondList, "http://127.0.0.1:8080/", "--push-allow"},
		{beyondList, "http://example.com/", ""}, // checked at the dial
	} {
		err := tc.targets.Check(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Check(%s) = %v, want allowed", tc.targets.Rule(), tc.url, err)
		case tc.want != "" && (err == nil || !errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), "push.url") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Check(%s) = %v, want a refusal naming %q", tc.targets.Rule(), tc.url, err, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "http://x", "x:80", "a b", "127.1", "2130706433"} {
		if _, err := pusher.ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q): no error", bad)
		}
	}
}

// TestTargets_Rule says which rule is in force.
func TestTargets_Rule(t *testing.T) {
	open, _ := pusher.ParseTargets("")
	list, _ := pusher.ParseTargets("b.internal,10.0.0.0/8,a.internal,::1")
	for _, tc := range []struct {
		targets *pusher.Targets
		want    string
	}{
		{nil, "any host but the cloud metadata endpoints"},
		{open.Serving(true, "127.0.0.1:7070"), "any host but the cloud metadata endpoints"},
		{open.Serving(false, "10.0.0.5:7070"), "none: this server listens beyond loopback"},
		{list.Serving(false, "10.0.0.5:7070"), "only the hosts --push-allow names: a.internal, b.internal, 10.0.0.0/8, ::1"},
	} {
		if got := tc.targets.Rule(); !strings.Contains(got, tc.want) {
			t.Errorf("Rule() = %q, want %q", got, tc.want)
		}
	}
}
