package api

// Trace context. A put may carry W3C Trace Context
// (https://www.w3.org/TR/trace-context/): a single put in its request's
// traceparent and tracestate headers, or in the body's fields of the same
// names ([PutRequest.Traceparent]), which win; each item of a batch in
// its own fields, the batch request's headers standing for items without
// one. The server keeps it with the task and hands it on unchanged: in
// the traceparent and tracestate fields of every answer that shows the
// task (a reserve's among them, each retry's too) and as the headers of
// the same names on every push request, so that the worker continues the
// producer's trace. A traceparent that is not valid (W3C's format,
// version 00 exactly 55 bytes, a later one at most 256) is dropped with
// its tracestate, and a tracestate that is not (over 512 bytes, 32
// members, or malformed) alone: as the recommendation has a receiver do,
// the put succeeds without it.
const (
	TraceparentHeader = "traceparent"
	TracestateHeader  = "tracestate"
)
