package cluster_test

import (
	"sync"

	"github.com/hourglass-go/hourglass/service"
)

// services are the services of svc, one an engine.
var services sync.Map

// svc returns service.New of e, made once per engine (e itself if it is
// a service already): the operations the front makes of the engine's
// primitives (service/jobs.go) are reached through it.
func svc(e any) service.Service {
	if s, ok := e.(service.Service); ok {
		return s
	}
	if s, ok := services.Load(e); ok {
		return s.(service.Service)
	}
	s, _ := services.LoadOrStore(e, service.New(e.(service.Engine)))
	return s.(service.Service)
}
