package cumulo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"time"
)

// Options configure one instance. Empty fields are taken from the
// environment the core gives to the processes it starts.
type Options struct {
	// Socket is where the core listens: a Unix socket path or tcp://HOST:PORT.
	// Default: $CUMULO_SOCKET.
	Socket string
	// Token identifies a managed process. Default: $CUMULO_TOKEN, unless
	// Prefix is set.
	Token string
	// Prefix makes the instance unmanaged: it connects without a token and
	// subscribes under this prefix (it must start with "/").
	Prefix string
	// ThreadIndex is which of the process's connections this is.
	ThreadIndex int
	// Window is the most requests the instance handles at once; above 1,
	// Poll runs handlers in that many goroutines concurrently. Default 1.
	Window int
	// TLSCA is a PEM file of the CA(s) that sign the core's certificate:
	// with a tcp:// Socket, the connection is TLS, verified against these CAs
	// only and the host of the address. Ignored for a Unix socket.
	// Default: $CUMULO_TLS_CA.
	TLSCA string
	// TLSCert and TLSKey are PEM files (the key PKCS#8, PKCS#1 or SEC 1) of
	// a client certificate, for a core that requires one; both or neither.
	// Default: $CUMULO_TLS_CERT and $CUMULO_TLS_KEY.
	TLSCert string
	TLSKey  string
}

// API is one instance: one connection to the core. Its methods may be
// called from any goroutine, handlers included; Poll must run in one
// goroutine at a time.
type API struct {
	conn        net.Conn
	in          *bufio.Reader
	out         frameWriter
	ids         transIDSource
	welcome     welcomeFrame
	threadIndex int
	recvLimit   uint32

	life       context.Context // handlers' contexts derive from it; cancelled when the connection ends
	endLife    context.CancelFunc
	readerDone chan struct{}
	ended      chan struct{} // closed when the connection ends; err says why
	endOnce    sync.Once
	err        error
	closeOnce  sync.Once

	responses *responses
	requests  requestQueue

	mu            sync.Mutex
	subscriptions map[string]*subscription // by full pattern, prefix included
	nextReqID     uint32
	replies       map[uint32]chan *replyFrame
	mcasts        map[TransID]chan *mcastSentFrame
}

// New connects the instance thread_index of a process the core started,
// from the CUMULO_* environment, with a window of 1.
func New(threadIndex int) (*API, error) {
	// A core that accepts but never answers must not hang the process.
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	return Connect(ctx, Options{ThreadIndex: threadIndex})
}

// Connect opens one instance: it sends HELLO and waits for WELCOME. An
// ERROR from the core is returned as an *Error (UNAUTHORIZED,
// UNSUPPORTED_VERSION, ...). ctx bounds the handshake only.
func Connect(ctx context.Context, opts Options) (*API, error) {
	if opts.Socket == "" {
		opts.Socket = os.Getenv("CUMULO_SOCKET")
	}
	if opts.Socket == "" {
		return nil, errorf(StatusInvalidArgument, "no socket: set Options.Socket or CUMULO_SOCKET")
	}
	if opts.Token == "" && opts.Prefix == "" {
		opts.Token = os.Getenv("CUMULO_TOKEN")
	}
	if opts.ThreadIndex < 0 || opts.ThreadIndex > math.MaxUint32 || opts.Window < 0 || opts.Window > math.MaxUint32 {
		return nil, errorf(StatusInvalidArgument, "thread index %d or window %d out of range", opts.ThreadIndex, opts.Window)
	}
	tlsCfg, err := tlsConfig(opts.Socket, opts)
	if err != nil {
		return nil, err
	}
	conn, err := dial(ctx, opts.Socket, tlsCfg)
	if err != nil {
		return nil, fmt.Errorf("cumulo: connecting to %s: %w", opts.Socket, err)
	}
	a := &API{
		conn:          conn,
		in:            bufio.NewReaderSize(conn, ioBufferSize),
		threadIndex:   opts.ThreadIndex,
		readerDone:    make(chan struct{}),
		ended:         make(chan struct{}),
		responses:     newResponses(),
		subscriptions: map[string]*subscription{},
		replies:       map[uint32]chan *replyFrame{},
		mcasts:        map[TransID]chan *mcastSentFrame{},
	}
	a.out.out = bufio.NewWriterSize(conn, ioBufferSize)
	a.requests.init()
	if err := a.handshake(ctx, opts); err != nil {
		conn.Close()
		return nil, err
	}
	a.life, a.endLife = context.WithCancel(context.Background())
	go a.readLoop()
	return a, nil
}

// connectTimeout bounds the handshake of New and Run.
const connectTimeout = 30 * time.Second

// handshakeLimit bounds the WELCOME, whose only variable field is a str.
const handshakeLimit = 1 << 17

func (a *API) handshake(ctx context.Context, opts Options) error {
	if deadline, ok := ctx.Deadline(); ok {
		a.conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { a.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	hello := &helloFrame{Version: 1, Window: uint32(max(opts.Window, 1)), ThreadIndex: uint32(opts.ThreadIndex),
		Token: opts.Token, Prefix: opts.Prefix}
	if err := a.out.write(hello); err != nil {
		return handshakeError(ctx, "sending HELLO", tlsRefusal(a.conn, err))
	}
	reply, err := readFrame(a.in, handshakeLimit)
	if err != nil {
		return handshakeError(ctx, "waiting for WELCOME", err)
	}
	a.conn.SetDeadline(time.Time{})
	switch f := reply.(type) {
	case *welcomeFrame:
		if f.Version != 1 {
			return errorf(StatusUnsupportedVersion, "the core chose protocol version %d; this SDK speaks 1", f.Version)
		}
		a.welcome = *f
		a.welcome.Window = max(f.Window, 1)
		a.ids.nodeID, a.ids.instanceID = f.NodeID, f.InstanceID
		a.out.maxFrame = f.MaxFrame
		// A REQUEST adds a source and the matched pattern to what its sender
		// sent within max_frame, so accept that much more.
		a.recvLimit = uint32(min(uint64(f.MaxFrame)+1<<16+16, math.MaxUint32))
		return nil
	case *errorFrame:
		return &Error{Status: f.Status, Message: f.Message}
	default:
		return errorf(StatusProtocol, "expected WELCOME, got %v", reply.frameType())
	}
}

// handshakeError reports an I/O failure of the handshake; a timeout of the
// socket comes from ctx's deadline, so it is reported as ctx's error.
func handshakeError(ctx context.Context, stage string, err error) error {
	var netErr net.Error
	if ctx.Err() != nil || (errors.As(err, &netErr) && netErr.Timeout()) {
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded // the socket's deadline fired a moment before ctx's timer
		}
		return fmt.Errorf("cumulo: %s: %w", stage, cause)
	}
	return fmt.Errorf("cumulo: %s: %w", stage, err)
}

// readLoop reads every frame the core sends, for as long as the connection
// lives, so that PINGs are answered and responses routed whatever the
// program is doing.
func (a *API) readLoop() {
	defer close(a.readerDone)
	for {
		f, err := readFrame(a.in, a.recvLimit)
		if err == nil {
			err = a.dispatch(f)
		}
		if err != nil {
			a.end(err)
			return
		}
	}
}

func (a *API) dispatch(f frame) error {
	switch f := f.(type) {
	case *pingFrame:
		if f.kind == framePing && !a.requests.overdue(time.Now()) {
			// Written from another goroutine: the reader must never wait on
			// the writer, or a core blocked on writing to us would deadlock.
			go a.send(&pingFrame{kind: framePong, Nonce: f.Nonce})
		}
	case *requestFrame:
		a.requests.push(f, time.Now())
	case *responseFrame:
		a.responses.deliver(f)
	case *replyFrame:
		a.mu.Lock()
		ch := a.replies[f.ReqID]
		delete(a.replies, f.ReqID)
		a.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	case *mcastSentFrame:
		a.mu.Lock()
		ch := a.mcasts[f.TransID]
		delete(a.mcasts, f.TransID)
		a.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	case *terminateFrame:
		a.requests.terminate()
	case *errorFrame:
		return &Error{Status: f.Status, Message: f.Message}
	default:
		return errorf(StatusProtocol, "the core sent %v, a frame of the instance's direction", f.frameType())
	}
	return nil
}

// end records why the connection ended, wakes every waiting call and
// closes the socket. Only the first reason counts.
func (a *API) end(reason error) {
	a.endOnce.Do(func() {
		if !errors.Is(reason, ErrClosed) {
			reason = fmt.Errorf("%w: %w", ErrClosed, reason)
		}
		a.err = reason
		close(a.ended)
		a.endLife()
		a.conn.Close()
	})
}

// send writes f; a failed write ends the connection, since the stream may
// now hold part of a frame.
func (a *API) send(f frame) error {
	select {
	case <-a.ended:
		return a.err
	default:
	}
	err := a.out.write(f)
	var e *Error
	if err != nil && !errors.As(err, &e) {
		a.end(err)
		return a.err
	}
	return err
}

// Close says GOODBYE and closes the connection. Calls still waiting return
// ErrClosed. Closing twice is harmless.
func (a *API) Close() error {
	a.closeOnce.Do(func() {
		a.send(&goodbyeFrame{})
		a.end(ErrClosed)
	})
	<-a.readerDone
	return nil
}

// Done is closed when the connection has ended; Err then says why.
func (a *API) Done() <-chan struct{} { return a.ended }

// Err returns why the connection ended (it wraps ErrClosed), or nil while
// it is open.
func (a *API) Err() error {
	select {
	case <-a.ended:
		return a.err
	default:
		return nil
	}
}

func msDuration(ms uint32) time.Duration { return time.Duration(ms) * time.Millisecond }

// ThreadIndex is which of its process's connections this instance is.
func (a *API) ThreadIndex() int { return a.threadIndex }

// ProcessIndex is the process's index among its service's processes.
func (a *API) ProcessIndex() int { return int(a.welcome.ProcessIndex) }

// ProcessCount is how many processes the service runs.
func (a *API) ProcessCount() int { return int(a.welcome.ProcessCount) }

// ThreadCount is how many instances each process of the service opens.
func (a *API) ThreadCount() int { return int(a.welcome.ThreadCount) }

// Prefix is the service prefix that subscriptions are relative to.
func (a *API) Prefix() string { return a.welcome.Prefix }

// TimeoutAsync is the default timeout of asynchronous sends.
func (a *API) TimeoutAsync() time.Duration { return msDuration(a.welcome.TimeoutAsync) }

// TimeoutSync is the default timeout of SendSync.
func (a *API) TimeoutSync() time.Duration { return msDuration(a.welcome.TimeoutSync) }

// TimeoutTerminate is the time given to finish after TERMINATE.
func (a *API) TimeoutTerminate() time.Duration { return msDuration(a.welcome.TimeoutTerminate) }

// PriorityDefault is the priority of sends that do not set one.
func (a *API) PriorityDefault() int8 { return a.welcome.PriorityDefault }

// NodeID is the core's node id.
func (a *API) NodeID() uint32 { return a.welcome.NodeID }

// InstanceID is this connection's id within the node.
func (a *API) InstanceID() uint32 { return a.welcome.InstanceID }

// Window is how many requests the core delivers at once, as granted.
func (a *API) Window() int { return int(a.welcome.Window) }

// MaxFrame is the largest frame the core accepts, in bytes.
func (a *API) MaxFrame() int { return int(a.welcome.MaxFrame) }

// Keepalive is the core's keep-alive interval: it sends PING this often,
// and closes a serving instance that stays silent for three intervals.
func (a *API) Keepalive() time.Duration { return msDuration(a.welcome.Keepalive) }
