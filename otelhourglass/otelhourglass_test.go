package otelhourglass_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/otelhourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serve starts the real HTTP API over a broker on a memory store and
// returns a client of it.
func serve(t *testing.T) *client.Client {
	b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s := httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry(), Logger: quiet})
	s.SetService(service.New(b))
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		b.Close()
	})
	c, err := client.New(hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestProducerToWorker: a Producer's put (single and batch) makes a
// producer span per task; the worker's handler, wrapped by Handler, runs
// in a consumer span per attempt, child of its task's producer span,
// with the queue, task id, attempt and outcome, the error of a failed
// attempt recorded; the retry has the same parent; a task put without a
// trace context gets a consumer span of a trace of its own.
func TestProducerToWorker(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := serve(t)
	ctx := context.Background()

	p := otelhourglass.NewProducer(c, otelhourglass.WithTracerProvider(tp))
	if _, _, err := p.Put(ctx, "q", api.PutRequest{ID: "single"}); err != nil {
		t.Fatal(err)
	}
	res, err := p.PutBatch(ctx, "q", []api.PutRequest{{ID: "b1"}, {ID: "b2"}, {ID: "bad id"}})
	if err != nil || len(res) != 3 || res[0].Task == nil || res[1].Task == nil || res[2].Error == "" {
		t.Fatalf("PutBatch = %+v, %v", res, err)
	}
	if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: "plain"}); err != nil {
		t.Fatal(err)
	}
	producers := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanKind != trace.SpanKindProducer || s.Name != "send q" {
			t.Errorf("span %q of kind %v, want producer spans \"send q\"", s.Name, s.SpanKind)
		}
		id := attrs(s)["messaging.message.id"].AsString()
		producers[id] = s
	}
	if len(producers) != 4 {
		t.Fatalf("producer spans of %v, want single, b1, b2 and bad id", producers)
	}
	if bad := producers["bad id"]; bad.Status.Code != codes.Error || len(bad.Events) == 0 || bad.Events[0].Name != "exception" {
		t.Errorf("the refused item's span: status %+v, events %+v; want its error recorded", bad.Status, bad.Events)
	}
	exp.Reset()

	// The worker: b1 fails once, b2 fails for good, the others succeed.
	var mu sync.Mutex
	tries := map[string]int{}
	done := make(chan struct{})
	h := otelhourglass.Handler(func(ctx context.Context, tk *worker.Task) error {
		mu.Lock()
		defer mu.Unlock()
		tries[tk.ID]++
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("task %s: the handler's context has no span", tk.ID)
		}
		if tries["single"] >= 1 && tries["b1"] >= 2 && tries["b2"] >= 1 && tries["plain"] >= 1 && len(tries) == 4 {
			defer close(done)
		}
		switch {
		case tk.ID == "b1" && tries[tk.ID] == 1:
			return worker.RetryAfter(time.Millisecond, errors.New("not yet"))
		case tk.ID == "b2":
			return worker.Fail(errors.New("never"))
		}
		return nil
	}, otelhourglass.WithTracerProvider(tp))
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", h)
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not handle every task")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	type want struct {
		attempt int64
		outcome string
		err     bool
	}
	wants := map[string][]want{
		"single": {{1, "ack", false}},
		"b1":     {{1, "retry", true}, {2, "ack", false}},
		"b2":     {{1, "fail", true}},
		"plain":  {{1, "ack", false}},
	}
	got := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		a := attrs(s)
		if s.SpanKind != trace.SpanKindConsumer || s.Name != "process q" || a["messaging.destination.name"].AsString() != "q" {
			t.Errorf("span %q of kind %v, destination %v; want consumer spans \"process q\"", s.Name, s.SpanKind, a["messaging.destination.name"])
		}
		id := a["messaging.message.id"].AsString()
		got[id] = append(got[id], s)
	}
	for id, ws := range wants {
		spans := got[id]
		if len(spans) != len(ws) {
			t.Errorf("%s: %d consumer spans, want %d", id, len(spans), len(ws))
			continue
		}
		for i, w := range ws {
			s, a := spans[i], attrs(spans[i])
			if a["hourglass.attempt"].AsInt64() != w.attempt || a["hourglass.outcome"].AsString() != w.outcome {
				t.Errorf("%s span %d: attempt %v, outcome %v; want %d, %s", id, i, a["hourglass.attempt"], a["hourglass.outcome"], w.attempt, w.outcome)
			}
			if recorded := s.Status.Code == codes.Error && len(s.Events) > 0 && s.Events[0].Name == "exception"; recorded != w.err {
				t.Errorf("%s span %d: status %+v, events %d; want the error recorded: %v", id, i, s.Status, len(s.Events), w.err)
			}
			prod, traced := producers[id]
			switch {
			case traced && (s.Parent.SpanID() != prod.SpanContext.SpanID() || s.SpanContext.TraceID() != prod.SpanContext.TraceID()):
				t.Errorf("%s span %d: parent %s of trace %s; want the producer's span %s of trace %s", id, i,
					s.Parent.SpanID(), s.SpanContext.TraceID(), prod.SpanContext.SpanID(), prod.SpanContext.TraceID())
			case traced && !s.Parent.IsRemote():
				t.Errorf("%s span %d: parent not remote", id, i)
			case !traced && s.Parent.IsValid():
				t.Errorf("%s span %d: a task put without a trace has parent %s", id, i, s.Parent.SpanID())
			}
		}
	}
}

// TestHandler_Panic: a handler's panic is recorded on its span, and
// panics on for the worker.
func TestHandler_Panic(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	h := otelhourglass.Handler(func(context.Context, *worker.Task) error { panic("boom") }, otelhourglass.WithTracerProvider(tp))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want boom", p)
			}
		}()
		h(context.Background(), &worker.Task{ID: "x", Queue: "q", Attempts: 1})
	}()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != codes.Error || spans[0].Status.Description != "panic: boom" ||
		attrs(spans[0])["hourglass.outcome"].AsString() != "retry" {
		t.Fatalf("spans %+v; want one with the panic recorded", spans)
	}
}
