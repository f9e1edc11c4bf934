package httpapi_test

import (
	"testing"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
)

// TestBulkLimits: the wire's limits of the operator's console are the
// service's.
func TestBulkLimits(t *testing.T) {
	for _, c := range []struct {
		name       string
		wire, serv int
	}{
		{"MaxFindScan", api.MaxFindScan, service.FindScan},
		{"MaxClashes", api.MaxClashes, service.MaxClashes},
		{"MaxFilterText", api.MaxFilterText, service.MaxFilterText},
	} {
		if c.wire != c.serv {
			t.Errorf("api.%s = %d, the service's %d", c.name, c.wire, c.serv)
		}
	}
}
