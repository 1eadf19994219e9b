package cumulo

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime/debug"
	"sync"
)

// Poll is the event loop: it runs the handlers of the requests the core
// delivers, up to Window of them at once, each in its own goroutine when
// Window is above 1. It returns nil once TERMINATE has arrived and every
// request received has been answered, ctx.Err() when ctx ends first (a
// timeout: call Poll again), or the error that ended the connection.
// Before returning it waits for the handlers it started.
func (a *API) Poll(ctx context.Context) error {
	var running sync.WaitGroup
	defer running.Wait()
	slots := make(chan struct{}, a.Window())
	for {
		req, err := a.nextRequest(ctx)
		if req == nil {
			return err
		}
		if cap(slots) == 1 {
			a.handle(req)
			continue
		}
		slots <- struct{}{}
		running.Add(1)
		go func() {
			defer func() { <-slots; running.Done() }()
			a.handle(req)
		}()
	}
}

// nextRequest returns the next request to run, or nil and why there is
// none.
func (a *API) nextRequest(ctx context.Context) (*Request, error) {
	for {
		select {
		case <-a.ended:
			if a.requests.isTerminated() {
				return nil, nil
			}
			return nil, a.err
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if req := a.requests.pop(); req != nil {
			return req, nil
		}
		if a.requests.isTerminated() {
			return nil, nil
		}
		select {
		case <-a.requests.ready:
		case <-a.requests.terminated:
		case <-a.ended:
		case <-ctx.Done():
		}
	}
}

// handle runs the handler of req and sends its RETURN, unless it forwarded
// the request.
func (a *API) handle(req *Request) {
	resp, status := a.run(req)
	// Answered from here on, even if a PING overtakes the RETURN.
	a.requests.finish(req.TransID)
	if req.forwarded.Load() {
		return
	}
	ret := &returnFrame{TransID: req.TransID, Status: status, ResponseInfo: resp.Info, Response: resp.Data}
	err := a.send(ret)
	if err != nil && !errors.Is(err, ErrClosed) {
		// Refused before sending (over the core's limit): tell the sender why.
		a.send(&returnFrame{TransID: req.TransID, Status: StatusTooLarge, Response: []byte(err.Error())})
	}
}

func (a *API) run(req *Request) (resp Response, status Status) {
	handler := a.handlerFor(req.Pattern)
	if handler == nil {
		msg := fmt.Sprintf("no handler subscribed for pattern %s", req.Pattern)
		return Response{Data: []byte(msg)}, StatusNoService
	}
	ctx, cancel := context.WithDeadline(a.life, req.deadline)
	defer cancel()
	// The handler's trace context (PROTOCOL.md 5.1, trace.go), for this
	// invocation only.
	if req.trace = traceOf(req.Info); req.trace != nil {
		ctx = context.WithValue(ctx, traceKey{}, req.trace)
		defer func() { req.trace = nil }()
	}
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("handler for %s panicked: %v", req.Pattern, p)
			log.Printf("cumulo: %s\n%s", msg, debug.Stack()) // the sender gets the message, the stack stays here
			resp, status = Response{Data: []byte(msg)}, StatusServiceError
		}
	}()
	resp, err := handler(ctx, a, req)
	if err != nil {
		return Response{Data: []byte(err.Error())}, StatusServiceError
	}
	return resp, StatusOK
}
