package cumulo

import (
	"context"
	"math"
	"time"
)

// SendOption changes one send.
type SendOption func(*sendConfig)

type sendConfig struct {
	info        []byte
	infoSet     bool
	timeout     time.Duration
	timeoutSet  bool
	priority    int8
	prioritySet bool
	flags       uint8
}

// WithInfo sets the request_info (see InfoEncode).
func WithInfo(info []byte) SendOption {
	return func(c *sendConfig) { c.info, c.infoSet = info, true }
}

// WithTimeout sets the request's timeout, rounded up to milliseconds; 0
// means the service's default.
func WithTimeout(d time.Duration) SendOption {
	return func(c *sendConfig) { c.timeout, c.timeoutSet = d, true }
}

// WithPriority sets the priority: lower is more urgent.
func WithPriority(p int8) SendOption {
	return func(c *sendConfig) { c.priority, c.prioritySet = p, true }
}

// WaitForService makes the core wait, up to the timeout, for an instance
// to subscribe the name instead of answering NO_SERVICE at once.
func WaitForService() SendOption {
	return func(c *sendConfig) { c.flags |= flagWaitForService }
}

func durationMs(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return uint32(min(int64(ms), math.MaxUint32))
}

// newSend builds a send frame with a new trans_id. Without WithTimeout the
// timeout is what is left of ctx's deadline, if it has one, so that a
// request sent from a handler does not outlive the handler's own; the
// handler's trace context comes from ctx too (trace.go).
func (a *API) newSend(ctx context.Context, kind frameType, name string, data []byte, opts []SendOption) (*sendFrame, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := sendConfig{priority: a.welcome.PriorityDefault}
	for _, opt := range opts {
		opt(&cfg)
	}
	timeout := durationMs(cfg.timeout)
	if deadline, ok := ctx.Deadline(); ok && !cfg.timeoutSet {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		timeout = durationMs(left)
	}
	return &sendFrame{kind: kind, TransID: a.ids.next(), Timeout: timeout, Priority: cfg.priority,
		Flags: cfg.flags, Name: name, RequestInfo: withTrace(cfg.info, traceFrom(ctx)), Request: data}, nil
}

// SendAsync sends a request to name and returns its trans_id at once; the
// response is collected with RecvAsync.
func (a *API) SendAsync(ctx context.Context, name string, data []byte, opts ...SendOption) (TransID, error) {
	f, err := a.newSend(ctx, frameSendAsync, name, data, opts)
	if err != nil {
		return TransID{}, err
	}
	return f.TransID, a.send(f)
}

// SendSync sends a request to name and waits for its response. A response
// with an error status is returned as an *Error (TIMEOUT, NO_SERVICE,
// SERVICE_ERROR, ...), alongside its response info. Requests that arrive
// meanwhile wait for Poll. If ctx ends first, ctx.Err() is returned and the
// late response is dropped.
func (a *API) SendSync(ctx context.Context, name string, data []byte, opts ...SendOption) (Response, error) {
	f, err := a.newSend(ctx, frameSendSync, name, data, opts)
	if err != nil {
		return Response{}, err
	}
	ch, _, err := a.responses.expect(f.TransID)
	if err != nil {
		return Response{}, err
	}
	if err := a.send(f); err != nil {
		a.responses.giveUp(f.TransID, ch, false)
		return Response{}, err
	}
	r, err := a.await(ctx, f.TransID, ch, true)
	if err != nil {
		return Response{}, err
	}
	return responseOf(r)
}

// McastAsync sends a copy of the request to every instance subscribed to
// a pattern matching name, and returns the trans_ids of the copies (none
// if nobody subscribes). Their responses are collected with RecvAsync.
func (a *API) McastAsync(ctx context.Context, name string, data []byte, opts ...SendOption) ([]TransID, error) {
	f, err := a.newSend(ctx, frameMcastAsync, name, data, opts)
	if err != nil {
		return nil, err
	}
	ch := make(chan *mcastSentFrame, 1)
	a.mu.Lock()
	a.mcasts[f.TransID] = ch
	a.mu.Unlock()
	forget := func() {
		a.mu.Lock()
		delete(a.mcasts, f.TransID)
		a.mu.Unlock()
	}
	if err := a.send(f); err != nil {
		forget()
		return nil, err
	}
	select {
	case sent := <-ch:
		return sent.TransIDs, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-a.ended:
		return nil, a.err
	}
}

// RecvAsync returns the response of the asynchronous request id, or with a
// zero id the oldest response not yet collected (waiting for one if there
// is none), together with its trans_id. A response with an error status is
// returned as an *Error. If ctx ends first, ctx.Err() is returned and the
// response stays to be collected later.
func (a *API) RecvAsync(ctx context.Context, id TransID) (TransID, Response, error) {
	var ch chan *responseFrame
	var r *responseFrame
	if id.IsZero() {
		ch, r = a.responses.expectNext()
	} else {
		var err error
		if ch, r, err = a.responses.expect(id); err != nil {
			return id, Response{}, err
		}
	}
	if r == nil {
		var err error
		if r, err = a.await(ctx, id, ch, false); err != nil {
			return id, Response{}, err
		}
	}
	resp, err := responseOf(r)
	return r.TransID, resp, err
}

func (a *API) await(ctx context.Context, id TransID, ch chan *responseFrame, dropLate bool) (*responseFrame, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		a.responses.giveUp(id, ch, dropLate)
		return nil, ctx.Err()
	case <-a.ended:
		select {
		case r := <-ch: // arrived just before the end
			return r, nil
		default:
			return nil, a.err
		}
	}
}

func responseOf(r *responseFrame) (Response, error) {
	resp := Response{Info: r.ResponseInfo, Data: r.Response}
	if r.Status != StatusOK {
		return Response{Info: r.ResponseInfo}, &Error{Status: r.Status, Message: string(r.Response)}
	}
	return resp, nil
}

// Forward passes req, which a handler of this instance is handling, to
// name with data as its payload; the original sender gets the final
// answer. The request keeps its info unless WithInfo is given (an info
// without traceparent then gets the request's, PROTOCOL.md 5.1). The handler
// then returns, and what it returns is not sent.
func (a *API) Forward(req *Request, name string, data []byte, opts ...SendOption) error {
	cfg := sendConfig{info: req.Info, priority: req.Priority}
	for _, opt := range opts {
		opt(&cfg)
	}
	if !req.forwarded.CompareAndSwap(false, true) {
		return errorf(StatusInvalidArgument, "request %s is already forwarded", req.TransID)
	}
	err := a.send(&sendFrame{kind: frameForward, TransID: req.TransID, Timeout: durationMs(cfg.timeout),
		Priority: cfg.priority, Flags: cfg.flags, Name: name, RequestInfo: withTrace(cfg.info, req.trace), Request: data})
	if err != nil {
		req.forwarded.Store(false) // not sent: the handler's answer is still due
	}
	return err
}
