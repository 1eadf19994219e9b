package cumulo

import (
	"bytes"
	"context"
)

// Trace context (PROTOCOL.md section 5.1): while a handler runs for a
// request R, its SendSync, SendAsync, McastAsync and Forward calls whose
// request_info has no traceparent get R's traceparent, then R's tracestate
// if any, appended after the pairs the handler gave.
//
// The context is kept per handler invocation, in the ctx Poll gives the
// handler (context.WithValue), not on the API: with a Window above 1
// several handlers run at once in goroutines, and each passes its own ctx
// to its calls, so one handler never takes another's context. That ctx is
// cancelled when the handler returns, so it cannot carry the context past
// the handler; a call with a ctx not derived from it (context.Background(),
// a client program) adds nothing. Forward takes no ctx: it takes the
// context from the request it forwards, which is R, for as long as its
// handler runs.

type traceKey struct{}

// traceparentKey is the key as encoded: its bytes, then NUL.
var traceparentKey = []byte("traceparent\x00")

// traceOf returns R's traceparent and tracestate pairs, encoded, or nil
// when R has no traceparent (or an info that is not key/value encoded).
func traceOf(info []byte) []byte {
	// The common case, a request without one, is found without parsing.
	if !bytes.Contains(info, traceparentKey) {
		return nil
	}
	pairs, err := InfoParse(info)
	if err != nil {
		return nil
	}
	parent, ok := InfoGet(pairs, "traceparent")
	if !ok {
		return nil
	}
	trace := []Pair{{"traceparent", parent}}
	if state, ok := InfoGet(pairs, "tracestate"); ok {
		trace = append(trace, Pair{"tracestate", state})
	}
	encoded, _ := InfoEncode(trace...) // parsed values hold no NUL
	return encoded
}

// withTrace returns info with trace appended, unless trace is empty or info
// already has a traceparent (or is not key/value encoded: sent as given).
func withTrace(info, trace []byte) []byte {
	if len(trace) == 0 {
		return info
	}
	pairs, err := InfoParse(info)
	if err != nil {
		return info
	}
	if _, ok := InfoGet(pairs, "traceparent"); ok {
		return info
	}
	out := make([]byte, 0, len(info)+len(trace)) // never write into the caller's slice
	return append(append(out, info...), trace...)
}

// traceFrom returns the trace context the handler's ctx carries, if any.
func traceFrom(ctx context.Context) []byte {
	trace, _ := ctx.Value(traceKey{}).([]byte)
	return trace
}
