// Command client is an unmanaged client: client SOCKET NAME HEX_BODY [sync|async]
//
// It prints the hex response_info, a newline and the response body; on an
// error status it prints the status name, a newline and the message, and
// exits 3.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	cumulo "cumulo.dev/sdk/go"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: client SOCKET NAME HEX_BODY [sync|async]")
		os.Exit(2)
	}
	body, err := hex.DecodeString(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad hex body:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api, err := cumulo.Connect(ctx, cumulo.Options{Socket: os.Args[1], Prefix: "/client/go/"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	defer api.Close()

	// No deadline on the sends themselves: the core's default timeout applies.
	var resp cumulo.Response
	if len(os.Args) > 4 && os.Args[4] == "async" {
		var id cumulo.TransID
		if id, err = api.SendAsync(context.Background(), os.Args[2], body); err == nil {
			_, resp, err = api.RecvAsync(ctx, id)
		}
	} else {
		resp, err = api.SendSync(context.Background(), os.Args[2], body)
	}
	var status *cumulo.Error
	switch {
	case err == nil:
		fmt.Printf("%x\n", resp.Info)
		os.Stdout.Write(resp.Data)
	case errors.As(err, &status):
		fmt.Printf("%s\n%s", status.Status, status.Message)
		api.Close()
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, err)
		api.Close()
		os.Exit(1)
	}
}
