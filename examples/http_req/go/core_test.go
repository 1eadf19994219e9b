package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	cumulo "cumulo.dev/sdk/go"
)

// TestUnderTheCore runs this example under a real cumulo core, with two
// instances, and calls it from an unmanaged client. It needs the core's
// binary: CUMULO_CORE=/path/to/cumulo go test ./...
func TestUnderTheCore(t *testing.T) {
	core := os.Getenv("CUMULO_CORE")
	if core == "" {
		t.Skip("CUMULO_CORE is not set to a cumulo binary")
	}
	dir, err := os.MkdirTemp("", "cumulo-http-req-go-") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	service := filepath.Join(dir, "http_req")
	if out, err := exec.Command("go", "build", "-o", service, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	socket := filepath.Join(dir, "cumulo.sock")
	config := filepath.Join(dir, "cumulo.toml")
	err = os.WriteFile(config, []byte(fmt.Sprintf(`[core]
socket = %q

[[service]]
prefix = "/tests/http_req/"
path = %q
count_process = 1
count_thread = 2
`, socket, service)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(core, "run", "--config", config)
	daemon.Stdout, daemon.Stderr = os.Stderr, os.Stderr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			t.Logf("core stopped: %v", err)
		case <-time.After(10 * time.Second):
			daemon.Process.Kill()
			t.Error("the core did not stop within 10s of SIGTERM")
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := connectWhenListening(ctx, t, socket)
	defer client.Close()

	xml := "text/xml; charset=utf-8"
	cases := []struct{ request, want string }{
		{"value\x0042\x00", "<http_test><value>42</value></http_test>"},
		{"value\x00+007\x00", "<http_test><value>7</value></http_test>"},
		{"value\x00-3\x00", "<http_test><value>-3</value></http_test>"},
		{"value\x00x\x00", "<http_test><error>no value specified</error></http_test>"},
		{"value", "<http_test><error>no value specified</error></http_test>"},
	}
	for i, c := range cases {
		opts := []cumulo.SendOption{cumulo.WithTimeout(5 * time.Second)}
		if i == 0 { // the service may still be starting
			opts = append(opts, cumulo.WaitForService(), cumulo.WithTimeout(20*time.Second))
		}
		resp, err := client.SendSync(ctx, "/tests/http_req/go.xml/get", []byte(c.request), opts...)
		if err != nil {
			t.Fatalf("SendSync(%q): %v", c.request, err)
		}
		info, err := cumulo.InfoParse(resp.Info)
		contentType, _ := cumulo.InfoGet(info, "content-type")
		if string(resp.Data) != c.want || err != nil || contentType != xml {
			t.Errorf("SendSync(%q) = %q with info %q, want %q with content-type %s", c.request, resp.Data, resp.Info, c.want, xml)
		}
	}

	// Both instances answer: send a burst asynchronously and collect it.
	var ids []cumulo.TransID
	for i := 0; i < 20; i++ {
		id, err := client.SendAsync(ctx, "/tests/http_req/go.xml/get", []byte(fmt.Sprintf("value\x00%d\x00", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		_, resp, err := client.RecvAsync(ctx, id)
		if want := fmt.Sprintf("<http_test><value>%d</value></http_test>", i); err != nil || string(resp.Data) != want {
			t.Errorf("async %d: %q, %v", i, resp.Data, err)
		}
	}
}

func connectWhenListening(ctx context.Context, t *testing.T, socket string) *cumulo.API {
	for {
		client, err := cumulo.Connect(ctx, cumulo.Options{Socket: socket, Prefix: "/client/"})
		if err == nil {
			return client
		}
		select {
		case <-ctx.Done():
			t.Fatalf("could not connect to the core: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
