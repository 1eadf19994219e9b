package cumulo

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// tlsConfig returns the TLS settings for a connection to socket, or nil for
// plain TCP and the Unix socket (local: TLS would protect nothing). Each
// file comes from its option, else from its environment variable; TLS is on
// when a CA is named and the address is tcp://.
func tlsConfig(socket string, opts Options) (*tls.Config, error) {
	addr, isTCP := strings.CutPrefix(socket, "tcp://")
	ca := firstNonEmpty(opts.TLSCA, os.Getenv("CUMULO_TLS_CA"))
	cert := firstNonEmpty(opts.TLSCert, os.Getenv("CUMULO_TLS_CERT"))
	key := firstNonEmpty(opts.TLSKey, os.Getenv("CUMULO_TLS_KEY"))
	if !isTCP || ca == "" {
		return nil, nil
	}
	if (cert == "") != (key == "") {
		return nil, errorf(StatusInvalidArgument, "TLS client certificate and key go together: got only the %s (CUMULO_TLS_CERT, CUMULO_TLS_KEY)",
			map[bool]string{true: "certificate", false: "key"}[cert != ""])
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, errorf(StatusInvalidArgument, "reading the TLS CA file: %v", err)
	}
	// Only the named CA: the core's certificate is usually from a private CA,
	// and trusting the system store as well would widen who can pose as it.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errorf(StatusInvalidArgument, "no PEM certificate in the TLS CA file %s", ca)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errorf(StatusInvalidArgument, "bad TCP address %q: %v", addr, err)
	}
	cfg := &tls.Config{
		RootCAs:    roots,
		ServerName: host, // an IP address is checked against the certificate's IP names
		MinVersion: tls.VersionTLS12,
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, errorf(StatusInvalidArgument, "loading the TLS client certificate %s and key %s: %v", cert, key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tlsRefusal returns the alert a TLS core sent before closing the connection,
// if one is there to read, else writeErr. Under TLS 1.3 the core refuses a
// client certificate after the client's handshake is done, so a write may
// fail on the closed connection before the refusal's reason has been read.
func tlsRefusal(conn net.Conn, writeErr error) error {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return writeErr
	}
	tc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	_, err := tc.Read(b[:])
	var netErr net.Error
	if err == nil || errors.Is(err, io.EOF) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return writeErr
	}
	return err
}
