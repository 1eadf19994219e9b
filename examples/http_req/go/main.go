// Command http_req is the http_req example service in Go: it subscribes
// go.xml/get under its prefix (/tests/http_req/) and answers the integer
// given as "value" in a key/value encoded request, as XML. It runs
// CUMULO_THREAD_COUNT instances, one goroutine and connection each.
// HTTP_REQ_WINDOW: requests the core may deliver to each instance at once
// (default 1), handled concurrently.
package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"strconv"

	cumulo "cumulo.dev/sdk/go"
)

func main() {
	xmlInfo, err := cumulo.InfoEncode(cumulo.Pair{Key: "content-type", Value: "text/xml; charset=utf-8"})
	if err != nil {
		log.Fatal(err)
	}
	handler := func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
		return cumulo.Response{Info: xmlInfo, Data: []byte(answer(req.Data))}, nil
	}
	window := 1
	if w := os.Getenv("HTTP_REQ_WINDOW"); w != "" {
		if window, err = strconv.Atoi(w); err != nil || window < 1 || window > math.MaxUint32 || w[0] == '+' {
			fmt.Fprintf(os.Stderr, "http_req: HTTP_REQ_WINDOW='%s' is not a positive integer\n", w)
			os.Exit(2)
		}
	}
	err = cumulo.RunWith(cumulo.Options{Window: window}, func(api *cumulo.API) error {
		return api.Subscribe("go.xml/get", handler)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// answer renders the reply to a request body: the integer value as parsed
// (an optional sign, decimal digits, within 64 bits), or an error element
// when it is missing, not such an integer, or the body is malformed.
func answer(request []byte) string {
	if pairs, err := cumulo.InfoParse(request); err == nil {
		if value, ok := cumulo.InfoGet(pairs, "value"); ok {
			// Base 10 accepts exactly a sign and digits: no 0x, no underscores.
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				return "<http_test><value>" + strconv.FormatInt(n, 10) + "</value></http_test>"
			}
		}
	}
	return "<http_test><error>no value specified</error></http_test>"
}
