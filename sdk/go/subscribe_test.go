package cumulo

import (
	"context"
	"errors"
	"testing"
)

// okHandler answers every request with text.
func okHandler(text string) HandlerFunc {
	return func(ctx context.Context, api *API, req *Request) (Response, error) {
		return Response{Data: []byte(text)}, nil
	}
}

// subscribe runs api.Subscribe while the core answers with reply.
func subscribe(t *testing.T, api *API, cc *coreConn, pattern string, handler HandlerFunc, reply replyFrame) error {
	t.Helper()
	call := background(func() (struct{}, error) { return struct{}{}, api.Subscribe(pattern, handler) })
	sub := expectType[*controlFrame](cc)
	if sub.kind != frameSubscribe || sub.Pattern != pattern {
		t.Fatalf("core got %v %q, want SUBSCRIBE %q", sub.kind, sub.Pattern, pattern)
	}
	reply.ReqID = sub.ReqID
	cc.write(&reply)
	_, err := await(t, call)
	return err
}

func TestSubscribeCountUnsubscribe(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	if err := subscribe(t, api, cc, "x.xml/get", okHandler("a"), replyFrame{}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if err := subscribe(t, api, cc, "x.xml/get", okHandler("b"), replyFrame{}); err != nil {
		t.Fatalf("second Subscribe: %v", err)
	}

	count := background(func() (int, error) { return api.SubscribeCount("x.xml/get") })
	req := expectType[*controlFrame](cc)
	if req.kind != frameSubscribeCount || req.Pattern != "x.xml/get" {
		t.Fatalf("core got %v %q", req.kind, req.Pattern)
	}
	cc.write(&replyFrame{ReqID: req.ReqID, Value: 2})
	if n, err := await(t, count); n != 2 || err != nil {
		t.Errorf("SubscribeCount = %d, %v", n, err)
	}

	// Control requests are told apart by req_id even when the core answers
	// out of order.
	first := background(func() (struct{}, error) { return struct{}{}, api.Unsubscribe("x.xml/get") })
	u1 := expectType[*controlFrame](cc)
	second := background(func() (struct{}, error) { return struct{}{}, api.Unsubscribe("x.xml/get") })
	u2 := expectType[*controlFrame](cc)
	if u1.kind != frameUnsubscribe || u1.ReqID == u2.ReqID {
		t.Fatalf("UNSUBSCRIBEs %+v %+v", u1, u2)
	}
	cc.write(&replyFrame{ReqID: u2.ReqID}, &replyFrame{ReqID: u1.ReqID})
	if _, err := await(t, first); err != nil {
		t.Error(err)
	}
	if _, err := await(t, second); err != nil {
		t.Error(err)
	}
	if api.handlerFor("/t/x.xml/get") != nil {
		t.Error("the handler outlived its last subscription")
	}
}

func TestSubscribeErrorIsReturnedAndForgotten(t *testing.T) {
	core := newFakeCore(t)
	api, cc, _ := core.connect(Options{}, testWelcome())
	err := subscribe(t, api, cc, "a**", okHandler("a"),
		replyFrame{Status: StatusInvalidArgument, Message: "two wildcards side by side"})
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument || e.Message != "two wildcards side by side" {
		t.Errorf("Subscribe gave %v", err)
	}
	if api.handlerFor("/t/a**") != nil {
		t.Error("a refused subscription kept its handler")
	}
}

func TestSubscribeRefusesNilHandler(t *testing.T) {
	core := newFakeCore(t)
	api, _, _ := core.connect(Options{}, testWelcome())
	if err := api.Subscribe("x", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Subscribe(nil) gave %v", err)
	}
}
