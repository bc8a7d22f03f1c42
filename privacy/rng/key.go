package rng

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// KeySize is the length of a secret key in bytes: 256 bits, the output size
// of SHA-256, which RFC 2104 §3 recommends as the HMAC-SHA256 key length.
const KeySize = 32

// Key is the secret from which every release's noise is derived
// (NewStream). Whoever holds it can recompute, and so subtract, the noise of
// every release: keep it like a private key. Reading it from a file or the
// environment is the job of operator/keyfile, outside the pure packages.
//
// A Key never prints: String, GoString, Format (every fmt verb), LogValue and
// MarshalText all give "[redacted]", and no error of this package contains
// key material.
type Key [KeySize]byte

// Errors about secret keys. Messages never contain key material.
var (
	// ErrKey: key material is malformed (wrong length, not hexadecimal, all
	// zero).
	ErrKey = errors.New("privacy: invalid secret key")
)

const redacted = "[redacted]"

// String implements fmt.Stringer without revealing the key.
func (k Key) String() string { return redacted }

// GoString implements fmt.GoStringer without revealing the key.
func (k Key) GoString() string { return "privacy.Key" + redacted }

// Format implements fmt.Formatter: every verb (%v, %x, %s, %d, …) prints
// "[redacted]".
func (k Key) Format(f fmt.State, verb rune) { io.WriteString(f, redacted) }

// LogValue implements slog.LogValuer without revealing the key.
func (k Key) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText implements encoding.TextMarshaler without revealing the key, so
// that configuration dumps (JSON, YAML) cannot leak it.
func (k Key) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// IsZero reports whether k is all zero bytes (an unset key).
func (k Key) IsZero() bool { return k == Key{} }

// KeyFromBytes returns the key with the given KeySize raw bytes. An all-zero
// key is rejected: it is what an unset key looks like.
func KeyFromBytes(b []byte) (Key, error) {
	var k Key
	if len(b) != KeySize {
		return k, fmt.Errorf("%w: need %d bytes, got %d", ErrKey, KeySize, len(b))
	}
	copy(k[:], b)
	if k.IsZero() {
		return Key{}, fmt.Errorf("%w: all bytes are zero", ErrKey)
	}
	return k, nil
}

// ParseKeyHex returns the key written as 2·KeySize hexadecimal digits;
// surrounding white space is ignored.
func ParseKeyHex(s string) (Key, error) {
	s = strings.TrimSpace(s)
	if len(s) != 2*KeySize {
		return Key{}, fmt.Errorf("%w: need %d hexadecimal digits, got %d characters", ErrKey, 2*KeySize, len(s))
	}
	var b [KeySize]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		// hex's error quotes the offending byte: do not wrap it.
		return Key{}, fmt.Errorf("%w: not hexadecimal", ErrKey)
	}
	return KeyFromBytes(b[:])
}

// ParseKey returns the key in the contents of a key file: 2·KeySize
// hexadecimal digits (surrounding white space ignored, the format
// keyfile.Generate writes) or exactly KeySize raw bytes.
func ParseKey(data []byte) (Key, error) {
	if t := bytes.TrimSpace(data); len(t) == 2*KeySize && isHex(t) {
		return ParseKeyHex(string(t))
	}
	if len(data) == KeySize {
		return KeyFromBytes(data)
	}
	return Key{}, fmt.Errorf("%w: need %d hexadecimal digits or %d raw bytes", ErrKey, 2*KeySize, KeySize)
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
