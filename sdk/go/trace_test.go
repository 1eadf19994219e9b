package cumulo

import (
	"context"
	"testing"
)

const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTracestate  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

// traceHandler makes, from a handler, a SendSync with info "k\0v\0", a
// SendAsync with its own traceparent, a McastAsync with no info and a
// Forward with an empty info.
func traceHandler(ctx context.Context, api *API, req *Request) (Response, error) {
	if _, err := api.SendSync(ctx, "/sync", nil, WithInfo([]byte("k\x00v\x00"))); err != nil {
		return Response{}, err
	}
	own := []byte("traceparent\x00" + "00-11111111111111111111111111111111-2222222222222222-00\x00")
	if _, err := api.SendAsync(ctx, "/async", nil, WithInfo(own)); err != nil {
		return Response{}, err
	}
	if _, err := api.McastAsync(ctx, "/mcast", nil); err != nil {
		return Response{}, err
	}
	return Response{}, api.Forward(req, "/forward", req.Data, WithInfo(nil))
}

// expectTraceCalls answers the calls of traceHandler and returns the
// request_info of each.
func expectTraceCalls(t *testing.T, cc *coreConn) (sync, async, mcast, forward string) {
	t.Helper()
	s := expectType[*sendFrame](cc)
	cc.write(&responseFrame{TransID: s.TransID})
	a := expectType[*sendFrame](cc)
	m := expectType[*sendFrame](cc)
	cc.write(&mcastSentFrame{TransID: m.TransID})
	f := expectType[*sendFrame](cc)
	if s.kind != frameSendSync || a.kind != frameSendAsync || m.kind != frameMcastAsync || f.kind != frameForward {
		t.Fatalf("got %v %v %v %v", s.kind, a.kind, m.kind, f.kind)
	}
	return string(s.RequestInfo), string(a.RequestInfo), string(m.RequestInfo), string(f.RequestInfo)
}

func TestTraceContextInheritedByHandlerCalls(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	if err := subscribe(t, api, cc, "trace", traceHandler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	f := testRequest(1, "/t/trace", "body")
	f.RequestInfo = []byte("x\x001\x00traceparent\x00" + testTraceparent + "\x00tracestate\x00" + testTracestate + "\x00")
	cc.write(f)
	sync, async, mcast, forward := expectTraceCalls(t, cc)
	trace := "traceparent\x00" + testTraceparent + "\x00tracestate\x00" + testTracestate + "\x00"
	if sync != "k\x00v\x00"+trace {
		t.Errorf("SEND_SYNC info %q, want the handler's pair then R's trace", sync)
	}
	if async != "traceparent\x00"+"00-11111111111111111111111111111111-2222222222222222-00\x00" {
		t.Errorf("SEND_ASYNC info %q, want the handler's own traceparent only", async)
	}
	if mcast != trace || forward != trace {
		t.Errorf("MCAST_ASYNC info %q, FORWARD info %q, want R's trace", mcast, forward)
	}

	// Without tracestate: traceparent only.
	f = testRequest(2, "/t/trace", "body")
	f.RequestInfo = []byte("traceparent\x00" + testTraceparent + "\x00")
	cc.write(f)
	if sync, _, mcast, _ = expectTraceCalls(t, cc); sync != "k\x00v\x00traceparent\x00"+testTraceparent+"\x00" ||
		mcast != "traceparent\x00"+testTraceparent+"\x00" {
		t.Errorf("without tracestate: SEND_SYNC info %q, MCAST_ASYNC info %q", sync, mcast)
	}

	// Outside any handler, after those ran: nothing added.
	if _, err := api.SendAsync(context.Background(), "/client", nil, WithInfo([]byte("k\x00v\x00"))); err != nil {
		t.Fatal(err)
	}
	if s := expectType[*sendFrame](cc); string(s.RequestInfo) != "k\x00v\x00" {
		t.Errorf("a call outside a handler sent info %q", s.RequestInfo)
	}
}

func TestRequestWithoutTraceparentAddsNothing(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	if err := subscribe(t, api, cc, "trace", traceHandler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	for i, info := range []string{"", "tracestate\x00" + testTracestate + "\x00"} {
		f := testRequest(byte(i+1), "/t/trace", "body")
		f.RequestInfo = []byte(info)
		cc.write(f)
		sync, _, mcast, forward := expectTraceCalls(t, cc)
		if sync != "k\x00v\x00" || mcast != "" || forward != "" {
			t.Errorf("request info %q: SEND_SYNC %q, MCAST_ASYNC %q, FORWARD %q", info, sync, mcast, forward)
		}
	}
}

// With a window of 2, two handlers wait in SendSync at once: each call
// carries its own request's traceparent.
func TestConcurrentHandlersKeepTheirOwnTraceContext(t *testing.T) {
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.Window = 2
	api, cc, _ := core.connect(Options{Window: 2}, welcome)
	handler := func(ctx context.Context, api *API, req *Request) (Response, error) {
		_, err := api.SendSync(ctx, "/to/"+string(req.Data), nil)
		return Response{}, err
	}
	if err := subscribe(t, api, cc, "trace", handler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	for i, name := range []string{"a", "b"} {
		f := testRequest(byte(i+1), "/t/trace", name)
		f.RequestInfo = []byte("traceparent\x00" + name + "\x00")
		cc.write(f)
	}
	sends := []*sendFrame{expectType[*sendFrame](cc), expectType[*sendFrame](cc)} // both handlers are waiting
	for _, s := range sends {
		if want := "traceparent\x00" + s.Name[len("/to/"):] + "\x00"; string(s.RequestInfo) != want {
			t.Errorf("SEND_SYNC to %s carried %q, want %q", s.Name, s.RequestInfo, want)
		}
		cc.write(&responseFrame{TransID: s.TransID})
	}
	expectType[*returnFrame](cc)
	expectType[*returnFrame](cc)
}

func TestWithTrace(t *testing.T) {
	trace := []byte("traceparent\x00t\x00")
	info := make([]byte, 4, 64)
	copy(info, "k\x00v\x00")
	if got := withTrace(info, trace); string(got) != "k\x00v\x00traceparent\x00t\x00" || info[:6][4] != 0 {
		t.Errorf("withTrace = %q, or it wrote into the caller's slice", got)
	}
	if got := withTrace([]byte("not kv"), trace); string(got) != "not kv" {
		t.Errorf("an info that is not key/value became %q", got)
	}
	if got := withTrace(nil, nil); got != nil {
		t.Errorf("no trace context gave %q", got)
	}
}
