package cumulo

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestHandshakeAndAccessors(t *testing.T) {
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.ProcessIndex, welcome.ProcessCount, welcome.ThreadCount = 2, 4, 3
	welcome.Window, welcome.PriorityDefault, welcome.TimeoutSync, welcome.Keepalive = 2, -3, 1500, 1250
	api, _, hello := core.connect(Options{Prefix: "/t/", ThreadIndex: 2, Window: 4}, welcome)

	if hello.Version != 1 || hello.Window != 4 || hello.ThreadIndex != 2 || hello.Token != "" || hello.Prefix != "/t/" {
		t.Errorf("HELLO = %+v", hello)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"ThreadIndex", api.ThreadIndex(), 2},
		{"ProcessIndex", api.ProcessIndex(), 2},
		{"ProcessCount", api.ProcessCount(), 4},
		{"ThreadCount", api.ThreadCount(), 3},
		{"Prefix", api.Prefix(), "/t/"},
		{"TimeoutAsync", api.TimeoutAsync(), 5 * time.Second},
		{"TimeoutSync", api.TimeoutSync(), 1500 * time.Millisecond},
		{"TimeoutTerminate", api.TimeoutTerminate(), 2 * time.Second},
		{"PriorityDefault", api.PriorityDefault(), int8(-3)},
		{"NodeID", api.NodeID(), uint32(1)},
		{"InstanceID", api.InstanceID(), uint32(7)},
		{"Window", api.Window(), 2},
		{"MaxFrame", api.MaxFrame(), 1 << 20},
		{"Keepalive", api.Keepalive(), 1250 * time.Millisecond},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s() = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestConnectTakesTokenAndSocketFromEnvironment(t *testing.T) {
	core := newFakeCore(t)
	t.Setenv("CUMULO_SOCKET", core.socket)
	t.Setenv("CUMULO_TOKEN", "c0ffee")
	call := background(func() (*API, error) { return New(1) })
	cc := core.accept()
	hello := expectType[*helloFrame](cc)
	if hello.Token != "c0ffee" || hello.Prefix != "" || hello.ThreadIndex != 1 || hello.Window != 1 {
		t.Errorf("HELLO = %+v", hello)
	}
	cc.write(testWelcome())
	api, err := await(t, call)
	if err != nil {
		t.Fatal(err)
	}
	api.Close()
	expectType[*goodbyeFrame](cc)
	cc.expectClosed()
}

func TestConnectReturnsTheCoresError(t *testing.T) {
	core := newFakeCore(t)
	call := background(func() (*API, error) {
		return Connect(context.Background(), Options{Socket: core.socket, Token: "bad"})
	})
	cc := core.accept()
	expectType[*helloFrame](cc)
	cc.write(&errorFrame{Status: StatusUnauthorized, Message: "unknown token"})
	_, err := await(t, call)
	var e *Error
	if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &e) || e.Message != "unknown token" {
		t.Errorf("Connect gave %v, want UNAUTHORIZED: unknown token", err)
	}
}

func TestConnectRefusesAnotherVersion(t *testing.T) {
	core := newFakeCore(t)
	call := background(func() (*API, error) {
		return Connect(context.Background(), Options{Socket: core.socket, Prefix: "/t/"})
	})
	cc := core.accept()
	expectType[*helloFrame](cc)
	welcome := testWelcome()
	welcome.Version = 2
	cc.write(welcome)
	if _, err := await(t, call); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("Connect gave %v, want UNSUPPORTED_VERSION", err)
	}
}

func TestConnectHonoursContextWhenCoreIsSilent(t *testing.T) {
	core := newFakeCore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	call := background(func() (*API, error) {
		return Connect(ctx, Options{Socket: core.socket, Prefix: "/t/"})
	})
	cc := core.accept()
	expectType[*helloFrame](cc)
	if _, err := await(t, call); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect gave %v, want context.DeadlineExceeded", err)
	}
}

func TestConnectWithoutSocket(t *testing.T) {
	t.Setenv("CUMULO_SOCKET", "")
	if _, err := Connect(context.Background(), Options{Prefix: "/t/"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Connect gave %v", err)
	}
}

func TestTCPSession(t *testing.T) {
	core := newFakeTCPCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	call := background(func() (int, error) { return api.SubscribeCount("x") })
	req := expectType[*controlFrame](cc)
	cc.write(&replyFrame{ReqID: req.ReqID, Value: 3})
	if n, err := await(t, call); n != 3 || err != nil {
		t.Errorf("SubscribeCount over TCP = %d, %v", n, err)
	}
}

func TestOversizedIncomingFrameIsRefused(t *testing.T) {
	core := newFakeCore(t)
	welcome := testWelcome()
	welcome.MaxFrame = 1024
	api, cc, _ := core.connect(Options{}, welcome)
	sync := background(func() (Response, error) { return api.SendSync(context.Background(), "/a", nil) })
	expectType[*sendFrame](cc)
	// Only a header announcing 16 MiB: the SDK must refuse it without
	// waiting for the body.
	cc.writeRaw([]byte{0x00, 0x00, 0x00, 0x01})
	_, err := await(t, sync)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrClosed) {
		t.Errorf("SendSync gave %v, want TOO_LARGE and closed", err)
	}
	cc.expectClosed()
	if err := api.Poll(context.Background()); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Poll gave %v", err)
	}
}

func TestMalformedIncomingFrameEndsTheConnection(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	cc.writeRaw([]byte{0x02, 0x00, 0x00, 0x00, 0x30, 0x01}) // a PING without its nonce
	<-api.Done()
	if err := api.Err(); !errors.Is(err, ErrMalformed) {
		t.Errorf("Err() = %v, want MALFORMED", err)
	}
	cc.expectClosed()
}

func TestErrorFromCoreFailsWaitingCalls(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	call := background(func() (Response, error) { return api.SendSync(context.Background(), "/a", nil) })
	expectType[*sendFrame](cc)
	cc.write(&errorFrame{Status: StatusShuttingDown, Message: "core stopping"})
	cc.conn.Close()
	_, err := await(t, call)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusShuttingDown || e.Message != "core stopping" || !errors.Is(err, ErrClosed) {
		t.Errorf("SendSync gave %v", err)
	}
	if _, err := api.SendAsync(context.Background(), "/a", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("SendAsync after the end gave %v", err)
	}
}

func TestConnectionLossFailsWaitingCalls(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	call := background(func() (struct{}, error) { return struct{}{}, api.Subscribe("x", okHandler("x")) })
	expectType[*controlFrame](cc)
	cc.conn.Close()
	if _, err := await(t, call); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe gave %v, want ErrClosed", err)
	}
}
