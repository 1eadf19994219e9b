package cumulo

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fakeCore plays the core's side of the protocol over a real socket. The
// test goroutine drives it frame by frame, while the API calls under test
// run in goroutines of their own.
type fakeCore struct {
	t      *testing.T
	ln     net.Listener
	socket string // what to pass as Options.Socket
}

const ioWait = 5 * time.Second // how long the fake core waits for the SDK

func newFakeCore(t *testing.T) *fakeCore {
	// Short path: Unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "cumulo-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "core.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &fakeCore{t: t, ln: ln, socket: socket}
}

func newFakeTCPCore(t *testing.T) *fakeCore {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &fakeCore{t: t, ln: ln, socket: "tcp://" + ln.Addr().String()}
}

// coreConn is the core's end of one instance connection.
type coreConn struct {
	t    *testing.T
	conn net.Conn
	in   *bufio.Reader
}

func (c *fakeCore) accept() *coreConn {
	c.t.Helper()
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := c.ln.Accept()
		done <- result{conn, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			c.t.Fatalf("accept: %v", r.err)
		}
		c.t.Cleanup(func() { r.conn.Close() })
		return &coreConn{t: c.t, conn: r.conn, in: bufio.NewReader(r.conn)}
	case <-time.After(ioWait):
		c.t.Fatal("no instance connected")
		return nil
	}
}

func (cc *coreConn) read() frame {
	cc.t.Helper()
	cc.conn.SetReadDeadline(time.Now().Add(ioWait))
	f, err := readFrame(cc.in, 1<<24)
	if err != nil {
		cc.t.Fatalf("core reading: %v", err)
	}
	return f
}

// expectType reads the next frame and checks its type.
func expectType[F frame](cc *coreConn) F {
	cc.t.Helper()
	f := cc.read()
	got, ok := f.(F)
	if !ok {
		cc.t.Fatalf("core got %v %+v, want a %T", f.frameType(), f, got)
	}
	return got
}

func (cc *coreConn) write(frames ...frame) {
	cc.t.Helper()
	var buf []byte
	for _, f := range frames {
		var err error
		if buf, err = encodeFrame(buf, f); err != nil {
			cc.t.Fatalf("core encoding %v: %v", f.frameType(), err)
		}
	}
	cc.writeRaw(buf)
}

func (cc *coreConn) writeRaw(b []byte) {
	cc.t.Helper()
	cc.conn.SetWriteDeadline(time.Now().Add(ioWait))
	if _, err := cc.conn.Write(b); err != nil {
		cc.t.Fatalf("core writing: %v", err)
	}
}

// expectClosed checks that the instance closed its end, reading at most
// what it still sends before.
func (cc *coreConn) expectClosed() {
	cc.t.Helper()
	cc.conn.SetReadDeadline(time.Now().Add(ioWait))
	for {
		if _, err := readFrame(cc.in, 1<<24); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				cc.t.Fatal("the instance did not close the connection")
			}
			return
		}
	}
}

func testWelcome() *welcomeFrame {
	return &welcomeFrame{
		Version: 1, NodeID: 1, InstanceID: 7, ProcessIndex: 0, ProcessCount: 1, ThreadCount: 1,
		Window: 1, MaxFrame: 1 << 20, TimeoutAsync: 5000, TimeoutSync: 5000, TimeoutTerminate: 2000,
		PriorityDefault: 0, Keepalive: 5000, Prefix: "/t/",
	}
}

// outcome is the result of a call run in the background.
type outcome[T any] struct {
	value T
	err   error
}

// background runs call in a goroutine; await collects its outcome.
func background[T any](call func() (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := call()
		ch <- outcome[T]{v, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch <-chan outcome[T]) (T, error) {
	t.Helper()
	select {
	case o := <-ch:
		return o.value, o.err
	case <-time.After(ioWait):
		t.Fatal("the call did not return")
		var zero T
		return zero, nil
	}
}

// connect opens an API to the fake core, answering its HELLO with
// welcome. It returns the API, the core's end and the HELLO.
func (c *fakeCore) connect(opts Options, welcome *welcomeFrame) (*API, *coreConn, *helloFrame) {
	c.t.Helper()
	opts.Socket = c.socket
	if opts.Prefix == "" && opts.Token == "" {
		opts.Prefix = welcome.Prefix
	}
	call := background(func() (*API, error) { return Connect(context.Background(), opts) })
	cc := c.accept()
	hello := expectType[*helloFrame](cc)
	cc.write(welcome)
	api, err := await(c.t, call)
	if err != nil {
		c.t.Fatalf("Connect: %v", err)
	}
	c.t.Cleanup(func() { api.Close() })
	return api, cc, hello
}

// pollInBackground runs api.Poll until the test ends or TERMINATE.
func pollInBackground(t *testing.T, api *API) <-chan outcome[struct{}] {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return background(func() (struct{}, error) { return struct{}{}, api.Poll(ctx) })
}
