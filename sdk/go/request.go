package cumulo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// HandlerFunc answers the requests of one subscription. ctx carries the
// request's deadline and is cancelled if the connection ends. What it
// returns becomes the RETURN; a non-nil error (or a panic) instead sends
// status SERVICE_ERROR with the error's text. After Forward, its results
// are ignored.
type HandlerFunc func(ctx context.Context, api *API, req *Request) (Response, error)

// Request is a request delivered to a handler.
type Request struct {
	TransID   TransID
	Name      string // the name the sender used
	Pattern   string // the full pattern that matched, prefix included
	Info      []byte // request_info, usually key/value encoded (see InfoParse)
	Data      []byte // the request payload
	Timeout   time.Duration
	Priority  int8
	Source    uint64 // node_id<<32 | instance_id of the sender; 0 is the core
	Sync      bool   // sent with SendSync
	Multicast bool   // a copy of a McastAsync

	deadline  time.Time
	forwarded atomic.Bool
	trace     []byte // its traceparent/tracestate pairs while its handler runs (trace.go)
}

// Deadline is when the sender stops waiting for the answer.
func (r *Request) Deadline() time.Time { return r.deadline }

// Response is what a handler answers, and what SendSync and RecvAsync
// receive.
type Response struct {
	Info []byte // response_info, usually key/value encoded
	Data []byte
}

// requestQueue holds the REQUESTs the reader received until Poll runs them,
// and the deadline of every request not yet answered.
type requestQueue struct {
	mu            sync.Mutex
	queue         []*Request
	open          map[TransID]time.Time
	ready         chan struct{} // signalled on each push; room for one signal
	terminated    chan struct{}
	terminateOnce sync.Once
}

func (q *requestQueue) init() {
	q.open = map[TransID]time.Time{}
	q.ready = make(chan struct{}, 1)
	q.terminated = make(chan struct{})
}

func (q *requestQueue) push(f *requestFrame, received time.Time) {
	timeout := msDuration(f.Timeout)
	req := &Request{
		TransID: f.TransID, Name: f.Name, Pattern: f.Pattern,
		Info: f.RequestInfo, Data: f.Request,
		Timeout: timeout, Priority: f.Priority, Source: f.Source,
		Sync: f.Flags&flagSync != 0, Multicast: f.Flags&flagMcast != 0,
		deadline: received.Add(timeout),
	}
	q.mu.Lock()
	q.queue = append(q.queue, req)
	q.open[req.TransID] = req.deadline
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *requestQueue) pop() *Request {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		return nil
	}
	req := q.queue[0]
	q.queue[0] = nil
	q.queue = q.queue[1:]
	return req
}

// finish forgets a request once it is returned or forwarded.
func (q *requestQueue) finish(id TransID) {
	q.mu.Lock()
	delete(q.open, id)
	q.mu.Unlock()
}

// overdue reports whether a request is still unanswered past its deadline.
// The reader then leaves PINGs unanswered, so that the core can see a stuck
// instance as hung (PROTOCOL.md section 3) although a goroutine keeps
// reading.
func (q *requestQueue) overdue(now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, deadline := range q.open {
		if now.After(deadline) {
			return true
		}
	}
	return false
}

func (q *requestQueue) terminate() {
	q.terminateOnce.Do(func() { close(q.terminated) })
}

func (q *requestQueue) isTerminated() bool {
	select {
	case <-q.terminated:
		return true
	default:
		return false
	}
}
