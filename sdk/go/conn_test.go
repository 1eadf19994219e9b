package cumulo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
)

// countingWriter counts the writes that reach the connection.
type countingWriter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.buf.Write(p)
}

func TestFrameWriterFlushesEveryFrameAndKeepsThemWhole(t *testing.T) {
	sink := &countingWriter{}
	w := &frameWriter{out: bufio.NewWriterSize(sink, ioBufferSize), maxFrame: 1 << 20}
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := w.write(&pingFrame{kind: framePing, Nonce: uint64(s*each + i)}); err != nil {
					t.Error(err)
				}
			}
		}(s)
	}
	wg.Wait()
	// Every frame must have reached the sink whole, none left in the buffer.
	r := bufio.NewReader(&sink.buf)
	seen := map[uint64]bool{}
	for i := 0; i < senders*each; i++ {
		f, err := readFrame(r, 64)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		seen[f.(*pingFrame).Nonce] = true
	}
	if len(seen) != senders*each || sink.buf.Len() != 0 {
		t.Errorf("got %d distinct frames, %d bytes left", len(seen), sink.buf.Len())
	}
	if sink.writes > senders*each {
		t.Errorf("%d writes for %d frames", sink.writes, senders*each)
	}
	t.Logf("%d frames in %d writes", senders*each, sink.writes)
}

func TestFrameWriterRefusesFramesOverTheCoreLimit(t *testing.T) {
	sink := &countingWriter{}
	w := &frameWriter{out: bufio.NewWriter(sink), maxFrame: 64}
	err := w.write(&sendFrame{kind: frameSendAsync, Name: "/a", Request: make([]byte, 64)})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write gave %v, want TOO_LARGE", err)
	}
	if sink.writes != 0 {
		t.Error("an oversized frame reached the connection")
	}
	if err := w.write(&goodbyeFrame{}); err != nil || sink.buf.Len() != 5 {
		t.Errorf("the writer is unusable after a refusal: %v", err)
	}
}

func TestDialChoosesTCPOrUnix(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := dial(context.Background(), "tcp://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatalf("tcp: %v", err)
	}
	conn.Close()
	if _, err := dial(context.Background(), "/nonexistent/cumulo.sock", nil); err == nil {
		t.Error("dialing a missing Unix socket succeeded")
	}
}
