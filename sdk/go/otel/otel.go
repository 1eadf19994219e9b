// Package cumulootel lets a handler's own OpenTelemetry spans join the
// trace of the request it handles (proto/PROTOCOL.md section 5.1).
//
// The cumulo SDK passes a request's trace context on by itself: a
// handler's calls inherit it. An application that records spans of its
// own makes them part of the same trace with two calls:
//
//	func handle(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
//		ctx, span := tracer.Start(cumulootel.Context(ctx, req), "work")
//		defer span.End()
//		// this call is the span's child, not the request's
//		_, err := api.SendSync(ctx, "/stock/get", nil, cumulo.WithInfo(cumulootel.Inject(ctx, nil)))
//		...
//	}
//
// It is a module of its own (cumulo.dev/sdk/go/otel) so that the SDK
// module stays standard library only: only a program that imports this
// package depends on the OpenTelemetry API.
package cumulootel

import (
	"context"

	cumulo "cumulo.dev/sdk/go"
	"go.opentelemetry.io/otel/propagation"
)

// The W3C Trace Context format, whatever global propagator the program set:
// it is the format of the request_info keys.
var propagator = propagation.TraceContext{}

var keys = [...]string{"traceparent", "tracestate"}

// Context returns ctx carrying the request's trace context as the remote
// parent span context, the parent of the spans the handler starts. When the
// request has no (valid) traceparent, ctx has no span context from it and a
// span started with it starts a trace (or keeps ctx's own parent).
func Context(ctx context.Context, req *cumulo.Request) context.Context {
	carrier := propagation.MapCarrier{}
	pairs, _ := cumulo.InfoParse(req.Info) // not key/value encoded: no pairs
	for _, key := range keys {
		if value, ok := cumulo.InfoGet(pairs, key); ok { // the first of a repeated key, as the SDK reads it
			carrier[key] = value
		}
	}
	return propagator.Extract(ctx, carrier)
}

// Inject returns info with the traceparent and tracestate of ctx's span
// context in place of any it had, after its other pairs. A call whose
// request_info names a traceparent is sent as it is, so the span's context
// wins over the one the SDK would append. info is returned unchanged when
// ctx has no valid span context, or when info is not key/value encoded. The
// caller's slice is never written into.
func Inject(ctx context.Context, info []byte) []byte {
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return info
	}
	pairs, err := cumulo.InfoParse(info)
	if err != nil {
		return info
	}
	out := make([]cumulo.Pair, 0, len(pairs)+len(keys))
	for _, p := range pairs {
		if p.Key != keys[0] && p.Key != keys[1] {
			out = append(out, p)
		}
	}
	for _, key := range keys {
		if value, ok := carrier[key]; ok {
			out = append(out, cumulo.Pair{Key: key, Value: value})
		}
	}
	encoded, err := cumulo.InfoEncode(out...)
	if err != nil { // cannot happen: parsed pairs and the propagator's values hold no NUL
		return info
	}
	return encoded
}
