// Command faulty is a service whose boom handler panics: the SDK must answer
// SERVICE_ERROR and keep serving (ok answers "ok"). The trace_* handlers
// call /echo/trace with an empty request_info and answer with the info the
// echo got, to show the trace context they inherit (PROTOCOL.md 5.1);
// FAULTY_TRACE_TARGET names another service to call (test_otlp.py).
package main

import (
	"context"
	"log"
	"os"

	cumulo "cumulo.dev/sdk/go"
)

type handler = func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error)

var echo = traceTarget()

func traceTarget() string {
	if name := os.Getenv("FAULTY_TRACE_TARGET"); name != "" {
		return name
	}
	return "/echo/trace"
}

// echoed answers with the echo's response_info as the body.
func echoed(resp cumulo.Response, err error) (cumulo.Response, error) {
	if err != nil {
		return cumulo.Response{}, err
	}
	return cumulo.Response{Data: resp.Info}, nil
}

func main() {
	handlers := []struct {
		pattern string
		handle  handler
	}{
		{"boom", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			panic("boom from go")
		}},
		{"ok", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			return cumulo.Response{Data: []byte("ok")}, nil
		}},
		{"trace_sync", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			return echoed(api.SendSync(ctx, echo, nil))
		}},
		{"trace_async", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			id, err := api.SendAsync(ctx, echo, nil)
			if err != nil {
				return cumulo.Response{}, err
			}
			_, resp, err := api.RecvAsync(ctx, id)
			return echoed(resp, err)
		}},
		{"trace_mcast", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			ids, err := api.McastAsync(ctx, echo, nil)
			if err != nil {
				return cumulo.Response{}, err
			}
			if len(ids) == 0 {
				return cumulo.Response{}, &cumulo.Error{Status: cumulo.StatusNoService, Message: "no copy of " + echo}
			}
			_, resp, err := api.RecvAsync(ctx, ids[0])
			return echoed(resp, err)
		}},
		{"trace_forward", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			return cumulo.Response{}, api.Forward(req, echo, req.Data, cumulo.WithInfo(nil))
		}},
	}
	err := cumulo.Run(func(api *cumulo.API) error {
		for _, h := range handlers {
			if err := api.Subscribe(h.pattern, h.handle); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
