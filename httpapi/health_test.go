package httpapi_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// unreadyBroker is a fakeBroker that can be alive and not ready (a
// cluster node cut off from its database): a service.Readiness.
type unreadyBroker struct {
	*fakeBroker
	ready atomic.Pointer[error]
}

func (u *unreadyBroker) Ready() error {
	if err := u.ready.Load(); err != nil {
		return *err
	}
	return nil
}

// TestReadiness_NotReady: while the engine says it cannot serve
// (service.Readiness), /readyz answers 503 with its reason and /healthz
// 200; once it can again, /readyz answers 200.
func TestReadiness_NotReady(t *testing.T) {
	s := httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry()})
	u := &unreadyBroker{fakeBroker: &fakeBroker{t: t}}
	s.SetService(service.New(u))
	err := fmt.Errorf("%w: database unreachable: no heartbeat for 2s", task.ErrClosed)
	u.ready.Store(&err)
	if w := do(s, "GET", "/readyz", ""); w.Code != 503 || errorText(t, w) != err.Error() {
		t.Errorf("/readyz while not ready: %d %s, want 503 %q", w.Code, w.Body.String(), err)
	}
	if w := do(s, "GET", "/healthz", ""); w.Code != 200 {
		t.Errorf("/healthz while not ready: %d %s, want 200", w.Code, w.Body.String())
	}
	u.ready.Store(nil)
	if w := do(s, "GET", "/readyz", ""); w.Code != 200 {
		t.Errorf("/readyz once ready again: %d %s, want 200", w.Code, w.Body.String())
	}
}
