package cumulo

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a CA with a server certificate (DNS:localhost, IP:127.0.0.1)
// and a client certificate, written as PEM files as make_certs.sh writes them.
type testPKI struct {
	dir                    string
	ca, otherCA            string // CA files
	clientCert, clientKey  string
	serverPair, wrongNamed tls.Certificate
	pool                   *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	caCert, caKey := makeCert(t, nil, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	p.pool.AddCert(caCert)
	p.ca = p.writePEM(t, "ca.pem", "CERTIFICATE", caCert.Raw)
	other, _ := makeCert(t, nil, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "other CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	p.otherCA = p.writePEM(t, "other-ca.pem", "CERTIFICATE", other.Raw)

	server := &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	p.serverPair = pair(makeCert(t, caCert, caKey, server))
	wrong := &x509.Certificate{Subject: pkix.Name{CommonName: "elsewhere"}, DNSNames: []string{"elsewhere.example"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	p.wrongNamed = pair(makeCert(t, caCert, caKey, wrong))

	clientCert, clientKey := makeCert(t, caCert, caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	p.clientCert = p.writePEM(t, "client.pem", "CERTIFICATE", clientCert.Raw)
	der, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = p.writePEM(t, "client.key", "PRIVATE KEY", der)
	return p
}

func (p *testPKI) writePEM(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var serial int64

// makeCert signs template with parent's key, or self-signs it without a parent.
func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, template *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	template.SerialNumber = big.NewInt(serial)
	template.NotBefore, template.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func pair(cert *x509.Certificate, key *ecdsa.PrivateKey) tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// tlsCore listens with TLS on 127.0.0.1 and answers one HELLO with a
// WELCOME; it returns the tcp:// address. clientCAs makes it require a
// client certificate signed by them.
func tlsCore(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) string {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(ioWait))
		if _, err := readFrame(bufio.NewReader(conn), handshakeLimit); err != nil {
			return // a refused handshake: the SDK must see the connection end
		}
		welcome, _ := encodeFrame(nil, testWelcome())
		conn.Write(welcome)
		var b [1]byte
		conn.Read(b[:]) // hold the connection until the SDK closes it
	}()
	return "tcp://" + ln.Addr().String()
}

func connectTLS(t *testing.T, opts Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioWait)
	defer cancel()
	opts.Prefix = "/t/"
	api, err := Connect(ctx, opts)
	if err == nil {
		api.Close()
	}
	return err
}

func clearTLSEnv(t *testing.T) {
	for _, k := range []string{"CUMULO_TLS_CA", "CUMULO_TLS_CERT", "CUMULO_TLS_KEY"} {
		t.Setenv(k, "")
	}
}

func TestTLSVerifiesTheCoreAgainstTheCAFromTheEnvironment(t *testing.T) {
	clearTLSEnv(t)
	p := newTestPKI(t)
	t.Setenv("CUMULO_TLS_CA", p.ca)
	if err := connectTLS(t, Options{Socket: tlsCore(t, p.serverPair, nil)}); err != nil {
		t.Fatalf("by IP address: %v", err)
	}
	addr := tlsCore(t, p.serverPair, nil)
	if err := connectTLS(t, Options{Socket: strings.Replace(addr, "127.0.0.1", "localhost", 1)}); err != nil {
		t.Fatalf("by DNS name: %v", err)
	}
}

func TestTLSOptionsWinOverTheEnvironment(t *testing.T) {
	clearTLSEnv(t)
	p := newTestPKI(t)
	t.Setenv("CUMULO_TLS_CA", p.otherCA)
	if err := connectTLS(t, Options{Socket: tlsCore(t, p.serverPair, nil), TLSCA: p.ca}); err != nil {
		t.Fatal(err)
	}
}

func TestTLSRefusesAnUnknownCAOrAnotherName(t *testing.T) {
	clearTLSEnv(t)
	p := newTestPKI(t)
	err := connectTLS(t, Options{Socket: tlsCore(t, p.serverPair, nil), TLSCA: p.otherCA})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("another CA: got %v, want an unknown authority", err)
	}
	err = connectTLS(t, Options{Socket: tlsCore(t, p.wrongNamed, nil), TLSCA: p.ca})
	var hostname x509.HostnameError
	if !errors.As(err, &hostname) {
		t.Errorf("another name: got %v, want a host name mismatch", err)
	}
}

func TestTLSClientCertificate(t *testing.T) {
	clearTLSEnv(t)
	p := newTestPKI(t)
	t.Setenv("CUMULO_TLS_CA", p.ca)
	t.Setenv("CUMULO_TLS_CERT", p.clientCert)
	t.Setenv("CUMULO_TLS_KEY", p.clientKey)
	if err := connectTLS(t, Options{Socket: tlsCore(t, p.serverPair, p.pool)}); err != nil {
		t.Fatalf("with a certificate: %v", err)
	}
	t.Setenv("CUMULO_TLS_CERT", "")
	t.Setenv("CUMULO_TLS_KEY", "")
	// TLS 1.3: the core's refusal arrives after the client's handshake,
	// while the SDK waits for WELCOME; it must still fail to connect.
	if err := connectTLS(t, Options{Socket: tlsCore(t, p.serverPair, p.pool)}); err == nil {
		t.Fatal("connected without the certificate the core requires")
	}
}

func TestTLSCertificateAndKeyGoTogether(t *testing.T) {
	clearTLSEnv(t)
	p := newTestPKI(t)
	for _, opts := range []Options{{TLSCA: p.ca, TLSCert: p.clientCert}, {TLSCA: p.ca, TLSKey: p.clientKey}} {
		opts.Socket = "tcp://127.0.0.1:1" // never dialled
		err := connectTLS(t, opts)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "together") {
			t.Errorf("%+v: got %v, want INVALID_ARGUMENT", opts, err)
		}
	}
}

func TestTLSMissingCAFileIsAClearError(t *testing.T) {
	clearTLSEnv(t)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	err := connectTLS(t, Options{Socket: "tcp://127.0.0.1:1", TLSCA: missing})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), missing) {
		t.Errorf("got %v, want INVALID_ARGUMENT naming %s", err, missing)
	}
}

func TestTLSCAIsIgnoredForTheUnixSocket(t *testing.T) {
	clearTLSEnv(t)
	t.Setenv("CUMULO_TLS_CA", filepath.Join(t.TempDir(), "nope.pem"))
	core := newFakeCore(t)
	api, _, _ := core.connect(Options{}, testWelcome())
	if _, ok := api.conn.(*tls.Conn); ok {
		t.Error("TLS over the Unix socket")
	}
}

func TestPlainTCPWithoutCA(t *testing.T) {
	clearTLSEnv(t)
	core := newFakeTCPCore(t)
	api, _, _ := core.connect(Options{}, testWelcome())
	if _, ok := api.conn.(*tls.Conn); ok {
		t.Error("TLS without a CA")
	}
}
