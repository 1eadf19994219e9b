package cumulo

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSendSyncWhilePingResponseAndRequestArrive(t *testing.T) {
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.PriorityDefault = -4
	api, cc, _ := core.connect(Options{}, welcome)
	if err := subscribe(t, api, cc, "x", okHandler("later"), replyFrame{}); err != nil {
		t.Fatal(err)
	}
	asyncID, err := api.SendAsync(context.Background(), "/t/other", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	expectType[*sendFrame](cc)

	call := background(func() (Response, error) {
		return api.SendSync(context.Background(), "/t/http/get", []byte("value\x0042\x00"),
			WithInfo([]byte("accept\x00text/xml\x00")), WithTimeout(1500*time.Millisecond))
	})
	send := expectType[*sendFrame](cc)
	if send.kind != frameSendSync || send.Name != "/t/http/get" || string(send.Request) != "value\x0042\x00" ||
		string(send.RequestInfo) != "accept\x00text/xml\x00" || send.Timeout != 1500 || send.Priority != -4 || send.Flags != 0 {
		t.Errorf("SEND_SYNC = %+v", send)
	}
	if send.TransID.NodeID() != 1 || send.TransID.InstanceID() != 7 || !send.TransID.Time().After(asyncID.Time()) {
		t.Errorf("trans_id %s does not follow %s or name instance 1/7", send.TransID, asyncID)
	}

	// While SendSync waits: a PING, the response of the earlier async send,
	// a request; then its own response.
	cc.write(&pingFrame{kind: framePing, Nonce: 77},
		&responseFrame{TransID: asyncID, Response: []byte("async answer")},
		testRequest(9, "/t/x", ""))
	if pong := expectType[*pingFrame](cc); pong.kind != framePong || pong.Nonce != 77 {
		t.Errorf("got %v %d, want PONG 77", pong.kind, pong.Nonce)
	}
	cc.write(&responseFrame{TransID: send.TransID, ResponseInfo: []byte("k\x00v\x00"), Response: []byte("sync answer")})
	resp, err := await(t, call)
	if err != nil || string(resp.Data) != "sync answer" || string(resp.Info) != "k\x00v\x00" {
		t.Fatalf("SendSync = %+v, %v", resp, err)
	}

	// The unrelated response was kept for RecvAsync...
	id, resp, err := api.RecvAsync(context.Background(), asyncID)
	if err != nil || id != asyncID || string(resp.Data) != "async answer" {
		t.Errorf("RecvAsync = %s %+v %v", id, resp, err)
	}
	// ...and the request for the next Poll.
	pollInBackground(t, api)
	expectReturn(t, cc, TransID{0x18, 15: 9}, StatusOK, "later")
}

func TestSendSyncErrorStatus(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	call := background(func() (Response, error) { return api.SendSync(context.Background(), "/nowhere", nil) })
	send := expectType[*sendFrame](cc)
	cc.write(&responseFrame{TransID: send.TransID, Status: StatusNoService, Response: []byte("no service subscribes /nowhere")})
	_, err := await(t, call)
	var e *Error
	if !errors.Is(err, ErrNoService) || !errors.As(err, &e) || e.Message != "no service subscribes /nowhere" {
		t.Errorf("SendSync gave %v", err)
	}
}

func TestSendTimeoutPriorityAndFlags(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := api.SendAsync(ctx, "/a", nil); err != nil {
		t.Fatal(err)
	}
	if f := expectType[*sendFrame](cc); f.Timeout < 1000 || f.Timeout > 2000 || f.Priority != 0 {
		t.Errorf("timeout from a 2s context = %d ms, priority %d", f.Timeout, f.Priority)
	}
	if _, err := api.SendAsync(ctx, "/a", nil, WithTimeout(time.Microsecond), WithPriority(9), WaitForService()); err != nil {
		t.Fatal(err)
	}
	if f := expectType[*sendFrame](cc); f.Timeout != 1 || f.Priority != 9 || f.Flags != flagWaitForService {
		t.Errorf("explicit options gave timeout %d, priority %d, flags %d", f.Timeout, f.Priority, f.Flags)
	}
	if _, err := api.SendAsync(context.Background(), "/a", nil); err != nil {
		t.Fatal(err)
	}
	if f := expectType[*sendFrame](cc); f.Timeout != 0 {
		t.Errorf("no deadline gave timeout %d, want 0 (the core's default)", f.Timeout)
	}
	cancel()
	if _, err := api.SendAsync(ctx, "/a", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("SendAsync with a cancelled context gave %v", err)
	}
}

func TestSendSyncGivenUpDropsTheLateResponse(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	ctx, cancel := context.WithCancel(context.Background())
	call := background(func() (Response, error) { return api.SendSync(ctx, "/slow", nil) })
	send := expectType[*sendFrame](cc)
	cancel()
	if _, err := await(t, call); !errors.Is(err, context.Canceled) {
		t.Fatalf("SendSync gave %v", err)
	}
	cc.write(&responseFrame{TransID: send.TransID, Response: []byte("late")},
		&responseFrame{TransID: TransID{1}, Response: []byte("kept")})
	id, resp, err := api.RecvAsync(context.Background(), TransID{})
	if err != nil || id != (TransID{1}) || string(resp.Data) != "kept" {
		t.Errorf("RecvAsync = %s %q %v, want the kept response only", id, resp.Data, err)
	}
}

func TestRecvAsyncByIDAndInOrder(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	var ids []TransID
	for i := 0; i < 3; i++ {
		id, err := api.SendAsync(context.Background(), "/a", []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		if f := expectType[*sendFrame](cc); f.kind != frameSendAsync || f.TransID != id {
			t.Fatalf("SEND_ASYNC %+v for %s", f, id)
		}
		ids = append(ids, id)
	}
	// A RecvAsync waiting before its response arrives.
	waiting := background(func() (Response, error) {
		_, resp, err := api.RecvAsync(context.Background(), ids[1])
		return resp, err
	})
	time.Sleep(20 * time.Millisecond)
	cc.write(&responseFrame{TransID: ids[2], Status: StatusTimeout, Response: []byte("timeout after 5000 ms")},
		&responseFrame{TransID: ids[1], Response: []byte("one")},
		&responseFrame{TransID: ids[0], Response: []byte("zero")})
	if resp, err := await(t, waiting); err != nil || string(resp.Data) != "one" {
		t.Errorf("RecvAsync(ids[1]) = %q, %v", resp.Data, err)
	}
	// The others in arrival order.
	id, _, err := api.RecvAsync(context.Background(), TransID{})
	if id != ids[2] || !errors.Is(err, ErrTimeout) {
		t.Errorf("first RecvAsync = %s, %v; want %s TIMEOUT", id, err, ids[2])
	}
	id, resp, err := api.RecvAsync(context.Background(), TransID{})
	if id != ids[0] || err != nil || string(resp.Data) != "zero" {
		t.Errorf("second RecvAsync = %s %q %v", id, resp.Data, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, _, err := api.RecvAsync(ctx, TransID{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RecvAsync with nothing left gave %v", err)
	}
}

func TestMcastAsync(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	call := background(func() ([]TransID, error) {
		return api.McastAsync(context.Background(), "/t/*", []byte("all"), WithPriority(127))
	})
	mc := expectType[*sendFrame](cc)
	if mc.kind != frameMcastAsync || mc.Name != "/t/*" || mc.Priority != 127 {
		t.Fatalf("MCAST_ASYNC = %+v", mc)
	}
	copies := []TransID{{0x18, 15: 1}, {0x18, 15: 2}}
	cc.write(&responseFrame{TransID: copies[1], Response: []byte("b")}, // may overtake MCAST_SENT
		&mcastSentFrame{TransID: mc.TransID, TransIDs: copies},
		&responseFrame{TransID: copies[0], Response: []byte("a")})
	ids, err := await(t, call)
	if err != nil || len(ids) != 2 || ids[0] != copies[0] || ids[1] != copies[1] {
		t.Fatalf("McastAsync = %v, %v", ids, err)
	}
	for i, want := range []string{"a", "b"} {
		if _, resp, err := api.RecvAsync(context.Background(), ids[i]); err != nil || string(resp.Data) != want {
			t.Errorf("copy %d: %q, %v", i, resp.Data, err)
		}
	}
}

func TestMcastAsyncToNobody(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	call := background(func() ([]TransID, error) { return api.McastAsync(context.Background(), "/none", nil) })
	mc := expectType[*sendFrame](cc)
	cc.write(&mcastSentFrame{TransID: mc.TransID})
	if ids, err := await(t, call); err != nil || len(ids) != 0 {
		t.Errorf("McastAsync = %v, %v", ids, err)
	}
}

func TestOversizedSendIsRefusedBeforeSending(t *testing.T) {
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.MaxFrame = 1024
	api, cc, _ := core.connect(Options{}, welcome)
	if _, err := api.SendSync(context.Background(), "/a", make([]byte, 1024)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SendSync gave %v, want TOO_LARGE", err)
	}
	// Nothing was sent and the connection is still usable.
	if _, err := api.SendAsync(context.Background(), "/small", nil); err != nil {
		t.Fatal(err)
	}
	if f := expectType[*sendFrame](cc); f.Name != "/small" {
		t.Errorf("core got %q first", f.Name)
	}
}
