// Command faulty is a service whose boom handler panics: the SDK must answer
// SERVICE_ERROR and keep serving (ok answers "ok").
package main

import (
	"context"
	"log"

	cumulo "cumulo.dev/sdk/go"
)

func main() {
	err := cumulo.Run(func(api *cumulo.API) error {
		err := api.Subscribe("boom", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			panic("boom from go")
		})
		if err != nil {
			return err
		}
		return api.Subscribe("ok", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
			return cumulo.Response{Data: []byte("ok")}, nil
		})
	})
	if err != nil {
		log.Fatal(err)
	}
}
