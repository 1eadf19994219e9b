package cumulootel_test

import (
	"context"
	"testing"

	cumulo "cumulo.dev/sdk/go"
	cumulootel "cumulo.dev/sdk/go/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID = "00f067aa0ba902b7"
	state    = "congo=t61rcWkgMzE"
	traced   = "traceparent\x00" + "00-" + traceID + "-" + parentID + "-01\x00tracestate\x00" + state + "\x00"
)

func TestAHandlersSpanIsTheRequestsChildAndTheParentOfItsCalls(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	req := &cumulo.Request{Name: "/tests/a/get", Info: []byte(traced)}

	ctx, span := provider.Tracer("test").Start(cumulootel.Context(context.Background(), req), "work")
	info := cumulootel.Inject(ctx, []byte("k\x00v\x00traceparent\x00old\x00"))
	span.End()

	spans := exporter.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	got := spans[0]
	if got.SpanContext.TraceID().String() != traceID {
		t.Errorf("span trace id %s, want the request's %s", got.SpanContext.TraceID(), traceID)
	}
	if got.Parent.SpanID().String() != parentID || !got.Parent.IsRemote() {
		t.Errorf("span parent %s (remote %v), want the request's %s", got.Parent.SpanID(), got.Parent.IsRemote(), parentID)
	}
	want := "k\x00v\x00traceparent\x00" + "00-" + traceID + "-" + got.SpanContext.SpanID().String() +
		"-01\x00tracestate\x00" + state + "\x00"
	if string(info) != want {
		t.Errorf("injected info %q, want %q (the span's id in place of the old traceparent)", info, want)
	}
}

func TestWithoutASpanOrATraceContextNothingIsAdded(t *testing.T) {
	info := []byte("k\x00v\x00")
	if got := cumulootel.Inject(context.Background(), info); string(got) != string(info) {
		t.Errorf("no span: info %q, want it unchanged", got)
	}
	untraced := cumulootel.Context(context.Background(), &cumulo.Request{Info: info})
	if trace.SpanContextFromContext(untraced).IsValid() {
		t.Error("a request without traceparent gave a valid span context")
	}
	if got := cumulootel.Inject(untraced, nil); len(got) != 0 {
		t.Errorf("a request without one: info %q, want empty", got)
	}
	bad := cumulootel.Context(context.Background(), &cumulo.Request{Info: []byte("traceparent\x00nonsense\x00")})
	if trace.SpanContextFromContext(bad).IsValid() {
		t.Error("an invalid traceparent gave a valid span context")
	}
	// The request's own context, injected as it is: replaces the old pair.
	ctx := cumulootel.Context(context.Background(), &cumulo.Request{Info: []byte(traced)})
	if got := cumulootel.Inject(ctx, []byte("traceparent\x00old\x00")); string(got) != traced {
		t.Errorf("replaced: info %q, want %q", got, traced)
	}
	// An info that is not key/value encoded is sent as given.
	if got := cumulootel.Inject(ctx, []byte("raw")); string(got) != "raw" {
		t.Errorf("raw info %q, want it unchanged", got)
	}
}
