package pusher

import (
	"context"
	"net"
	"net/http"
)

// DialWith makes p's pushes dial with dial rather than through its
// targets' checks: a test's receiver over in-memory connections
// (net.Pipe), which, unlike a socket, runs in a synctest bubble. Call it
// before Start.
func DialWith(p *Pusher, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	p.client.Transport.(*http.Transport).DialContext = dial
}
