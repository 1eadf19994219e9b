// Package cumulo is the Go SDK of cumulo: it connects a service instance to
// the cumulo core over the wire protocol v1 (proto/PROTOCOL.md), subscribes
// handlers to service names, sends requests to other services and answers
// the requests the core routes to it.
//
// One *API is one instance, that is one connection. A process started by the
// core usually calls Run, which opens CUMULO_THREAD_COUNT instances, each in
// its own goroutine:
//
//	func main() {
//		err := cumulo.Run(func(api *cumulo.API) error {
//			return api.Subscribe("hello/get", func(ctx context.Context, api *cumulo.API, req *cumulo.Request) (cumulo.Response, error) {
//				return cumulo.Response{Data: []byte("hello")}, nil
//			})
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Failures are returned as errors; those that carry a protocol status are
// *Error values and match the Err* sentinels with errors.Is.
package cumulo
