// Command {{name}} is a cumulo service: it subscribes {{name}}/get under its
// prefix and answers "hello from {{name}}", with the request's "value"
// parameter when it has one. It runs CUMULO_THREAD_COUNT instances.
package main

import (
	"context"
	"log"

	cumulo "cumulo.dev/sdk/go"
)

func main() {
	text, err := cumulo.InfoEncode(cumulo.Pair{Key: "content-type", Value: "text/plain; charset=utf-8"})
	if err != nil {
		log.Fatal(err)
	}
	get := func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
		body := "hello from {{name}}"
		// Malformed key/value bytes are answered as if there were no value.
		if pairs, err := cumulo.InfoParse(req.Data); err == nil {
			if value, ok := cumulo.InfoGet(pairs, "value"); ok {
				body += " (value " + value + ")"
			}
		}
		return cumulo.Response{Info: text, Data: []byte(body)}, nil
	}
	err = cumulo.Run(func(api *cumulo.API) error {
		return api.Subscribe("{{name}}/get", get)
	})
	if err != nil {
		log.Fatal(err)
	}
}
