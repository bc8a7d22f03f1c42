package operator

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSASLMechanisms(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  SASLConfig
		name string
	}{
		{SASLConfig{}, ""},
		{SASLConfig{Mechanism: "plain", Username: "u", Password: "p"}, "PLAIN"},
		{SASLConfig{Mechanism: "SCRAM-SHA-256", Username: "u", PasswordFile: pwFile}, "SCRAM-SHA-256"},
		{SASLConfig{Mechanism: "scram-sha-512", Username: "u", Password: "p"}, "SCRAM-SHA-512"},
	} {
		m, err := tc.cfg.mechanism()
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg.Mechanism, err)
		}
		if (m == nil) != (tc.name == "") || (m != nil && m.Name() != tc.name) {
			t.Errorf("%q: got %v", tc.cfg.Mechanism, m)
		}
	}
	_, err := SASLConfig{Mechanism: "plain", Username: "u", PasswordFile: filepath.Join(dir, "missing")}.mechanism()
	if !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("missing password file: %v", err)
	}
}

// TestTLSConfig builds a TLS config from a freshly generated CA.
func TestTLSConfig(t *testing.T) {
	if c, err := (TLSConfig{}).config(); c != nil || err != nil {
		t.Fatalf("disabled TLS: %v, %v", c, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := TLSConfig{Enabled: true, CAFile: ca, ServerName: "kafka.example"}.config()
	if err != nil || c.RootCAs == nil || c.ServerName != "kafka.example" || c.MinVersion == 0 {
		t.Fatalf("TLS config: %+v, %v", c, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	_ = os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := (TLSConfig{Enabled: true, CAFile: bad}).config(); !errors.Is(err, ErrConfig) {
		t.Errorf("bad CA file: %v", err)
	}
}
