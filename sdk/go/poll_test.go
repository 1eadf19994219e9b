package cumulo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func testRequest(id byte, pattern string, data string) *requestFrame {
	return &requestFrame{
		TransID: TransID{0x18, 15: id}, Timeout: 5000, Flags: flagSync, Source: 1<<32 | 9,
		Name: pattern, Pattern: pattern, Request: []byte(data),
	}
}

func expectReturn(t *testing.T, cc *coreConn, id TransID, status Status, data string) *returnFrame {
	t.Helper()
	ret := expectType[*returnFrame](cc)
	if ret.TransID != id || ret.Status != status || string(ret.Response) != data {
		t.Fatalf("RETURN = %s %v %q, want %s %v %q", ret.TransID, ret.Status, ret.Response, id, status, data)
	}
	return ret
}

func TestRequestIsHandledAndReturned(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	seen := make(chan *Request, 1)
	deadlines := make(chan time.Time, 1)
	handler := func(ctx context.Context, api *API, req *Request) (Response, error) {
		seen <- req
		deadline, _ := ctx.Deadline()
		deadlines <- deadline
		return Response{Info: []byte("content-type\x00text/plain\x00"), Data: append([]byte("echo "), req.Data...)}, nil
	}
	if err := subscribe(t, api, cc, "echo/?", handler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	polling := pollInBackground(t, api)

	f := testRequest(1, "/t/echo/?", "hi")
	f.Name, f.Timeout, f.Priority, f.Flags, f.RequestInfo = "/t/echo/x", 800, -2, flagSync|flagMcast, []byte("k\x00v\x00")
	sent := time.Now()
	cc.write(f)
	ret := expectReturn(t, cc, f.TransID, StatusOK, "echo hi")
	if string(ret.ResponseInfo) != "content-type\x00text/plain\x00" {
		t.Errorf("response_info = %q", ret.ResponseInfo)
	}
	req := <-seen
	if req.TransID != f.TransID || req.Name != "/t/echo/x" || req.Pattern != "/t/echo/?" || !bytes.Equal(req.Info, f.RequestInfo) ||
		req.Timeout != 800*time.Millisecond || req.Priority != -2 || req.Source != 1<<32|9 || !req.Sync || !req.Multicast {
		t.Errorf("handler got %+v", req)
	}
	if d := (<-deadlines).Sub(sent); d < 700*time.Millisecond || d > 800*time.Millisecond+time.Second {
		t.Errorf("handler deadline is %v after sending, want about 800ms", d)
	}

	cc.write(&terminateFrame{Timeout: 1000})
	if _, err := await(t, polling); err != nil {
		t.Errorf("Poll after TERMINATE gave %v, want nil", err)
	}
}

func TestHandlerErrorAndPanicGiveServiceErrorAndServingGoesOn(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	handler := func(ctx context.Context, api *API, req *Request) (Response, error) {
		switch string(req.Data) {
		case "fail":
			return Response{Data: []byte("ignored")}, fmt.Errorf("bad input %q", req.Data)
		case "panic":
			panic("boom")
		}
		return Response{Data: []byte("fine")}, nil
	}
	if err := subscribe(t, api, cc, "x", handler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)

	cc.write(testRequest(1, "/t/x", "fail"))
	expectReturn(t, cc, TransID{0x18, 15: 1}, StatusServiceError, `bad input "fail"`)
	cc.write(testRequest(2, "/t/x", "panic"))
	ret := expectType[*returnFrame](cc)
	if ret.Status != StatusServiceError || !strings.Contains(string(ret.Response), "panicked: boom") {
		t.Errorf("after a panic, RETURN %v %q", ret.Status, ret.Response)
	}
	cc.write(testRequest(3, "/t/x", "ok"))
	expectReturn(t, cc, TransID{0x18, 15: 3}, StatusOK, "fine")
}

func TestRequestForUnknownPatternGetsNoService(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	pollInBackground(t, api)
	cc.write(testRequest(1, "/t/nothing", ""))
	expectReturn(t, cc, TransID{0x18, 15: 1}, StatusNoService, "no handler subscribed for pattern /t/nothing")
}

func TestWindowRunsHandlersConcurrently(t *testing.T) {
	const window = 3
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.Window = window
	api, cc, hello := core.connect(Options{Window: window}, welcome)
	if hello.Window != window {
		t.Fatalf("HELLO window = %d", hello.Window)
	}
	var running atomic.Int32
	allIn := make(chan struct{})
	handler := func(ctx context.Context, api *API, req *Request) (Response, error) {
		if running.Add(1) == window {
			close(allIn)
		}
		// Each handler waits until all of them run at once: only possible
		// if they are concurrent.
		select {
		case <-allIn:
			return Response{Data: req.Data}, nil
		case <-ctx.Done():
			return Response{}, errors.New("handlers did not run concurrently")
		}
	}
	if err := subscribe(t, api, cc, "slow", handler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	for i := byte(1); i <= window; i++ {
		f := testRequest(i, "/t/slow", fmt.Sprint(i))
		f.Timeout = 2000
		cc.write(f)
	}
	got := map[string]bool{}
	for i := 0; i < window; i++ {
		ret := expectType[*returnFrame](cc)
		if ret.Status != StatusOK {
			t.Fatalf("RETURN %v %q", ret.Status, ret.Response)
		}
		got[string(ret.Response)] = true
	}
	if len(got) != window {
		t.Errorf("answers %v", got)
	}
}

func TestForwardSendsNoReturn(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	handler := func(ctx context.Context, api *API, req *Request) (Response, error) {
		if err := api.Forward(req, "/other/name", []byte("payload"), WithTimeout(250*time.Millisecond)); err != nil {
			return Response{}, err
		}
		if err := api.Forward(req, "/again", nil); !errors.Is(err, ErrInvalidArgument) {
			return Response{}, fmt.Errorf("second Forward gave %v", err)
		}
		return Response{Data: []byte("not sent")}, nil
	}
	if err := subscribe(t, api, cc, "fwd", handler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	f := testRequest(1, "/t/fwd", "x")
	f.RequestInfo, f.Priority = []byte("traceparent\x0000-ab-cd-01\x00"), 5
	cc.write(f)
	fwd := expectType[*sendFrame](cc)
	if fwd.kind != frameForward || fwd.TransID != f.TransID || fwd.Name != "/other/name" || fwd.Timeout != 250 ||
		fwd.Priority != 5 || string(fwd.Request) != "payload" || !bytes.Equal(fwd.RequestInfo, f.RequestInfo) {
		t.Errorf("FORWARD = %+v", fwd)
	}
	// The next frame must be the PONG: no RETURN in between.
	cc.write(&pingFrame{kind: framePing, Nonce: 5})
	if pong := expectType[*pingFrame](cc); pong.kind != framePong || pong.Nonce != 5 {
		t.Errorf("got %v %d", pong.kind, pong.Nonce)
	}
}

func TestOversizedReturnBecomesTooLarge(t *testing.T) {
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.MaxFrame = 1024
	api, cc, _ := core.connect(Options{}, welcome)
	if err := subscribe(t, api, cc, "big", okHandler(strings.Repeat("x", 2000)), replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	cc.write(testRequest(1, "/t/big", ""))
	ret := expectType[*returnFrame](cc)
	if ret.Status != StatusTooLarge || !strings.Contains(string(ret.Response), "over the core's limit of 1024") {
		t.Errorf("RETURN %v %q", ret.Status, ret.Response)
	}
}

func TestOverdueRequestSilencesPong(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	release := make(chan struct{})
	handler := func(ctx context.Context, api *API, req *Request) (Response, error) {
		<-release
		return Response{Data: []byte("late")}, nil
	}
	if err := subscribe(t, api, cc, "stuck", handler, replyFrame{}); err != nil {
		t.Fatal(err)
	}
	pollInBackground(t, api)
	f := testRequest(1, "/t/stuck", "")
	f.Timeout = 10
	cc.write(f)
	time.Sleep(50 * time.Millisecond) // past the request's deadline
	cc.write(&pingFrame{kind: framePing, Nonce: 1})
	time.Sleep(50 * time.Millisecond) // time for a PONG that must not come
	close(release)
	// RETURN first: the PING of the stuck instance got no PONG.
	expectReturn(t, cc, f.TransID, StatusOK, "late")
	cc.write(&pingFrame{kind: framePing, Nonce: 2})
	if pong := expectType[*pingFrame](cc); pong.kind != framePong || pong.Nonce != 2 {
		t.Errorf("got %v %d, want PONG 2", pong.kind, pong.Nonce)
	}
}

func TestTerminateFinishesDeliveredRequests(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	if err := subscribe(t, api, cc, "x", okHandler("done"), replyFrame{}); err != nil {
		t.Fatal(err)
	}
	cc.write(testRequest(1, "/t/x", ""), testRequest(2, "/t/x", ""), &terminateFrame{Timeout: 1000})
	// Let the reader take all three before Poll starts.
	cc.write(&pingFrame{kind: framePing, Nonce: 1})
	expectType[*pingFrame](cc)
	polling := pollInBackground(t, api)
	expectReturn(t, cc, TransID{0x18, 15: 1}, StatusOK, "done")
	expectReturn(t, cc, TransID{0x18, 15: 2}, StatusOK, "done")
	if _, err := await(t, polling); err != nil {
		t.Errorf("Poll gave %v", err)
	}
}

func TestPollReturnsWhenContextEnds(t *testing.T) {
	core := newFakeCore(t)
	api, _, _ := core.connect(Options{}, testWelcome())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := api.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Poll gave %v, want context.DeadlineExceeded", err)
	}
}
