package privacy

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
)

// KeySize is the length of a secret key in bytes: 256 bits, the output size
// of SHA-256, which RFC 2104 §3 recommends as the HMAC-SHA256 key length.
const KeySize = 32

// KeyEnv is the default environment variable that holds the secret key as 64
// hexadecimal digits.
const KeyEnv = "DPSTREAM_KEY"

// Key is the secret from which every release's noise is derived
// (NewStream). Whoever holds it can recompute, and so subtract, the noise of
// every release: keep it like a private key.
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
	// ErrKeyPermissions: a key file is accessible by group or others.
	ErrKeyPermissions = errors.New("privacy: key file permissions too open")
	// ErrNoKey: no key is configured and generating one was not allowed.
	ErrNoKey = errors.New("privacy: no secret key configured")
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
// GenerateKeyFile writes) or exactly KeySize raw bytes.
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

// ReadKeyFile reads a key file (see ParseKey). The file must be a regular
// file with no permission bits for group or others (mode 0600 or 0400), or
// a Kubernetes Secret file as a non-root container with an fsGroup sees it
// (mode 0440, owned by root, group one of the process's groups; see
// keyModeOK): otherwise ReadKeyFile fails with ErrKeyPermissions and does
// not read it.
func ReadKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, fmt.Errorf("privacy: key file: %w", err)
	}
	defer f.Close()
	// Stat the open file, not the path, so that the checked file is the
	// read file.
	st, err := f.Stat()
	if err != nil {
		return Key{}, fmt.Errorf("privacy: key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Key{}, fmt.Errorf("%w: %s is not a regular file", ErrKey, path)
	}
	if perm := st.Mode().Perm(); !keyModeOK(perm, ownerOf(st), os.Geteuid(), processGroups()) {
		return Key{}, fmt.Errorf("%w: %s has mode %04o; it must not be accessible by group or others (chmod 600 %s)",
			ErrKeyPermissions, path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 4*KeySize))
	if err != nil {
		return Key{}, fmt.Errorf("privacy: key file %s: %w", path, err)
	}
	k, err := ParseKey(data)
	if err != nil {
		return Key{}, fmt.Errorf("%w (key file %s)", err, path)
	}
	return k, nil
}

// KeyFromEnv returns the key held, as hexadecimal digits, in the environment
// variable name. ok is false if the variable is unset or empty.
func KeyFromEnv(name string) (k Key, ok bool, err error) {
	v := os.Getenv(name)
	if v == "" {
		return Key{}, false, nil
	}
	k, err = ParseKeyHex(v)
	if err != nil {
		return Key{}, true, fmt.Errorf("%w (environment variable %s)", err, name)
	}
	return k, true, nil
}

// NewRandomKey returns a fresh key from crypto/rand.
func NewRandomKey() (Key, error) {
	var k Key
	for k.IsZero() {
		if _, err := rand.Read(k[:]); err != nil {
			return Key{}, fmt.Errorf("privacy: generating a key: %w", err)
		}
	}
	return k, nil
}

// GenerateKeyFile creates path with a fresh random key in hexadecimal, mode
// 0600, and returns the key. It never overwrites: if path exists it fails
// with an error wrapping fs.ErrExist.
func GenerateKeyFile(path string) (Key, error) {
	k, err := NewRandomKey()
	if err != nil {
		return Key{}, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Key{}, fmt.Errorf("privacy: key file: %w", err)
	}
	// The umask can only remove bits; Chmod makes the mode exact anyway.
	text := make([]byte, 2*KeySize+1)
	hex.Encode(text, k[:])
	text[2*KeySize] = '\n'
	_, err = f.Write(text)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return Key{}, fmt.Errorf("privacy: writing key file %s: %w", path, err)
	}
	return k, nil
}

// LoadKey finds the secret key: the environment variable env if it is set
// (env may be empty to skip it), else the file path if it exists (path may
// be empty to skip it). If neither is there and generate is true, it
// generates a key into path (mode 0600) and returns a warning the caller
// must log; the warning names the path but never the key. Otherwise it fails
// with ErrNoKey.
func LoadKey(path, env string, generate bool) (k Key, warning string, err error) {
	if env != "" {
		if k, ok, err := KeyFromEnv(env); ok || err != nil {
			return k, "", err
		}
	}
	if path != "" {
		k, err := ReadKeyFile(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return k, "", err
		}
	}
	if !generate || path == "" {
		return Key{}, "", fmt.Errorf("%w: set %s or a key file", ErrNoKey, nonEmpty(env, KeyEnv))
	}
	k, err = GenerateKeyFile(path)
	if err != nil {
		return Key{}, "", err
	}
	warning = fmt.Sprintf("privacy: no secret key was configured; generated a new one in %s (mode 0600). "+
		"Back it up and keep it secret: without it, a re-published window gets different noise; with it, anyone can remove the noise.", path)
	return k, warning, nil
}

func nonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
