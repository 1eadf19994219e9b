package cumulo

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

const ioBufferSize = 64 << 10

// dial connects to a CUMULO_SOCKET address: tcp://HOST:PORT or a Unix
// socket path. With tlsCfg (TCP only) the TLS handshake is done here, so a
// refused certificate is an error from connecting; the *tls.Conn is then
// read and written like any net.Conn.
func dial(ctx context.Context, socket string, tlsCfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	if addr, ok := strings.CutPrefix(socket, "tcp://"); ok {
		if tlsCfg != nil {
			td := tls.Dialer{NetDialer: &d, Config: tlsCfg}
			return td.DialContext(ctx, "tcp", addr)
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	return d.DialContext(ctx, "unix", socket)
}

// frameWriter serialises frames from any goroutine onto the connection.
// Frames are buffered and the buffer is flushed by the last of the writers
// queued at that moment, so concurrent RETURNs and sends leave in one
// syscall instead of one each.
type frameWriter struct {
	queued   atomic.Int32
	mu       sync.Mutex
	out      *bufio.Writer
	err      error  // the first write error; the connection is unusable after it
	maxFrame uint32 // the core's limit from WELCOME; 0 until then
}

var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// write encodes f and sends it. A frame over the core's limit is refused
// here with TOO_LARGE, since the core would close the connection for it.
func (w *frameWriter) write(f frame) error {
	bufp := encodeBuffers.Get().(*[]byte)
	defer func() {
		if cap(*bufp) <= ioBufferSize { // do not keep huge payload buffers alive
			encodeBuffers.Put(bufp)
		}
	}()
	encoded, err := encodeFrame((*bufp)[:0], f)
	*bufp = encoded
	if err != nil {
		return err
	}
	if length := uint64(len(encoded) - headerSize); w.maxFrame > 0 && length > uint64(w.maxFrame) {
		return errorf(StatusTooLarge, "%v of %d bytes is over the core's limit of %d", f.frameType(), length, w.maxFrame)
	}
	w.queued.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.queued.Add(-1) == 0
	if w.err != nil {
		return w.err
	}
	if _, err := w.out.Write(encoded); err != nil {
		w.err = err
		return err
	}
	if last {
		w.err = w.out.Flush()
	}
	return w.err
}
