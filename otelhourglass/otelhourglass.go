// Package otelhourglass traces hourglass tasks with OpenTelemetry, from
// the producer that puts a task to the worker that handles it: a
// [Producer] puts each task in a producer span and sends that span's
// context with the task (its W3C traceparent and tracestate, which the
// server keeps and hands on with every delivery, push requests
// included), and [Handler] runs a worker's handler in a consumer span,
// child of the producer's, on every attempt.
//
// It is a package of its own so that only its importers depend on
// OpenTelemetry: the timer library, package client and package worker
// do not.
//
// Spans follow OpenTelemetry's messaging conventions: "send QUEUE"
// (producer) and "process QUEUE" (consumer), with messaging.system
// "hourglass", messaging.destination.name the queue and
// messaging.message.id the task's id; a consumer span also has
// hourglass.attempt (1 on the first) and hourglass.outcome (the
// worker's [worker.Outcome] of the handler's return: ack, retry or
// fail), and records the handler's error, or its panic, with an error
// status.
package otelhourglass

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/worker"
)

// ScopeName is the instrumentation scope of the package's tracer.
const ScopeName = "github.com/hourglass-go/hourglass/otelhourglass"

// Attribute keys of the spans.
const (
	keySystem      = attribute.Key("messaging.system")
	keyOperation   = attribute.Key("messaging.operation.name")
	keyDestination = attribute.Key("messaging.destination.name")
	keyMessageID   = attribute.Key("messaging.message.id")
	keyBatchCount  = attribute.Key("messaging.batch.message_count")
	KeyAttempt     = attribute.Key("hourglass.attempt")
	KeyOutcome     = attribute.Key("hourglass.outcome")
)

// Option configures a [Producer] or a [Handler].
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// WithTracerProvider makes the spans with tp; default the global
// provider (otel.GetTracerProvider) as it is when the Producer or the
// Handler is made.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithPropagator carries a span's context with p; default
// propagation.TraceContext, the W3C headers the server keeps. Only what
// p writes as traceparent and tracestate goes with a task.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

func newConfig(opts []Option) config {
	c := config{tp: otel.GetTracerProvider(), prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func (c config) tracer() trace.Tracer { return c.tp.Tracer(ScopeName) }

// Producer puts tasks as its client does, each in a producer span. It is
// safe for simultaneous use by multiple goroutines, as the client is.
type Producer struct {
	c      *client.Client
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// NewProducer returns a Producer that puts through c.
func NewProducer(c *client.Client, opts ...Option) *Producer {
	cfg := newConfig(opts)
	return &Producer{c: c, tracer: cfg.tracer(), prop: cfg.prop}
}

// Put puts r into queue as [client.Client.Put] does, in a span "send
// QUEUE" of kind producer, child of ctx's span, whose context it sends
// with the task (r's Traceparent and Tracestate are replaced). The span
// records a failed put's error.
func (p *Producer) Put(ctx context.Context, queue string, r api.PutRequest) (api.Task, bool, error) {
	ctx, span := p.start(ctx, queue, &r)
	defer span.End()
	t, created, err := p.c.Put(ctx, queue, r)
	if err != nil {
		failed(span, err)
		return t, created, err
	}
	span.SetAttributes(keyMessageID.String(t.ID))
	return t, created, nil
}

// PutBatch puts rs into queue in one request as [client.Client.PutBatch]
// does, each task in its own producer span as Put makes it; each span
// records its item's error, or the batch's. It takes O(len(rs)) spans.
func (p *Producer) PutBatch(ctx context.Context, queue string, rs []api.PutRequest) ([]api.BatchResult, error) {
	traced := make([]api.PutRequest, len(rs))
	spans := make([]trace.Span, len(rs))
	for i := range rs {
		traced[i] = rs[i]
		_, spans[i] = p.start(ctx, queue, &traced[i])
		spans[i].SetAttributes(keyBatchCount.Int(len(rs)))
	}
	res, err := p.c.PutBatch(ctx, queue, traced)
	for i, span := range spans {
		switch {
		case err != nil:
			failed(span, err)
		case i >= len(res):
			failed(span, fmt.Errorf("hourglass: no answer for item %d of the batch", i))
		case res[i].Error != "":
			failed(span, errors.New(res[i].Error))
		case res[i].Task != nil:
			span.SetAttributes(keyMessageID.String(res[i].Task.ID))
		}
		span.End()
	}
	return res, err
}

// start starts the producer span of a put of r into queue and writes its
// context into r.
func (p *Producer) start(ctx context.Context, queue string, r *api.PutRequest) (context.Context, trace.Span) {
	ctx, span := p.tracer.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(keySystem.String("hourglass"), keyOperation.String("send"), keyDestination.String(queue)))
	if r.ID != "" {
		span.SetAttributes(keyMessageID.String(r.ID))
	}
	carrier := propagation.MapCarrier{}
	p.prop.Inject(ctx, carrier)
	r.Traceparent, r.Tracestate = carrier.Get(api.TraceparentHeader), carrier.Get(api.TracestateHeader)
	return ctx, span
}

// Handler returns h run in a span "process QUEUE" of kind consumer on
// each attempt, child of the span whose context the task was put with
// (a Producer's), else of ctx's; the span's context is in the ctx h
// gets. The span says the task's queue, id and attempt, and the outcome
// of h's return; it records h's error, or its panic (which Handler
// panics again, for the worker to count as an error), with an error
// status.
func Handler(h worker.Handler, opts ...Option) worker.Handler {
	cfg := newConfig(opts)
	tracer, prop := cfg.tracer(), cfg.prop
	return func(ctx context.Context, t *worker.Task) (err error) {
		if t.Traceparent != "" {
			carrier := propagation.MapCarrier{api.TraceparentHeader: t.Traceparent}
			if t.Tracestate != "" {
				carrier[api.TracestateHeader] = t.Tracestate
			}
			ctx = prop.Extract(ctx, carrier)
		}
		ctx, span := tracer.Start(ctx, "process "+t.Queue, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(keySystem.String("hourglass"), keyOperation.String("process"),
				keyDestination.String(t.Queue), keyMessageID.String(t.ID), KeyAttempt.Int(t.Attempts)))
		defer span.End()
		defer func() {
			if p := recover(); p != nil {
				perr := fmt.Errorf("panic: %v", p)
				span.SetAttributes(KeyOutcome.String(worker.Outcome(perr)))
				failed(span, perr)
				panic(p)
			}
		}()
		err = h(ctx, t)
		span.SetAttributes(KeyOutcome.String(worker.Outcome(err)))
		if err != nil {
			failed(span, err)
		}
		return err
	}
}

// failed records err on span and sets its status to error.
func failed(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
