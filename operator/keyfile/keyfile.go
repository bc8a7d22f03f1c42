package keyfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/dpstream/dpstream/privacy/rng"
)

// Env is the default environment variable that holds the secret key as 64
// hexadecimal digits.
const Env = "DPSTREAM_KEY"

// Errors about key files. Messages never contain key material. Their text
// is the one package privacy gave them before the key-file code moved here,
// so that logs and operators' alerts keep matching.
var (
	// ErrPermissions: a key file is accessible by group or others.
	ErrPermissions = errors.New("privacy: key file permissions too open")
	// ErrNoKey: no key is configured and generating one was not allowed.
	ErrNoKey = errors.New("privacy: no secret key configured")
)

// Read reads a key file (see rng.ParseKey). The file must be a regular
// file with no permission bits for group or others (mode 0600 or 0400), or
// a Kubernetes Secret file as a non-root container with an fsGroup sees it
// (mode 0440, owned by root, group one of the process's groups; see
// keyModeOK): otherwise Read fails with ErrPermissions and does
// not read it.
func Read(path string) (rng.Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return rng.Key{}, fmt.Errorf("privacy: key file: %w", err)
	}
	defer f.Close()
	// Stat the open file, not the path, so that the checked file is the
	// read file.
	st, err := f.Stat()
	if err != nil {
		return rng.Key{}, fmt.Errorf("privacy: key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return rng.Key{}, fmt.Errorf("%w: %s is not a regular file", rng.ErrKey, path)
	}
	if perm := st.Mode().Perm(); !keyModeOK(perm, ownerOf(st), os.Geteuid(), processGroups()) {
		return rng.Key{}, fmt.Errorf("%w: %s has mode %04o; it must not be accessible by group or others (chmod 600 %s)",
			ErrPermissions, path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 4*rng.KeySize))
	if err != nil {
		return rng.Key{}, fmt.Errorf("privacy: key file %s: %w", path, err)
	}
	k, err := rng.ParseKey(data)
	if err != nil {
		return rng.Key{}, fmt.Errorf("%w (key file %s)", err, path)
	}
	return k, nil
}

// FromEnv returns the key held, as hexadecimal digits, in the environment
// variable name. ok is false if the variable is unset or empty.
func FromEnv(name string) (k rng.Key, ok bool, err error) {
	v := os.Getenv(name)
	if v == "" {
		return rng.Key{}, false, nil
	}
	k, err = rng.ParseKeyHex(v)
	if err != nil {
		return rng.Key{}, true, fmt.Errorf("%w (environment variable %s)", err, name)
	}
	return k, true, nil
}

// NewRandomKey returns a fresh key from crypto/rand.
func NewRandomKey() (rng.Key, error) {
	var k rng.Key
	for k.IsZero() {
		if _, err := rand.Read(k[:]); err != nil {
			return rng.Key{}, fmt.Errorf("privacy: generating a key: %w", err)
		}
	}
	return k, nil
}

// Generate creates path with a fresh random key in hexadecimal, mode
// 0600, and returns the key. It never overwrites: if path exists it fails
// with an error wrapping fs.ErrExist.
func Generate(path string) (rng.Key, error) {
	k, err := NewRandomKey()
	if err != nil {
		return rng.Key{}, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return rng.Key{}, fmt.Errorf("privacy: key file: %w", err)
	}
	// The umask can only remove bits; Chmod makes the mode exact anyway.
	text := make([]byte, 2*rng.KeySize+1)
	hex.Encode(text, k[:])
	text[2*rng.KeySize] = '\n'
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
		return rng.Key{}, fmt.Errorf("privacy: writing key file %s: %w", path, err)
	}
	return k, nil
}

// Load finds the secret key: the environment variable env if it is set
// (env may be empty to skip it), else the file path if it exists (path may
// be empty to skip it). If neither is there and generate is true, it
// generates a key into path (mode 0600) and returns a warning the caller
// must log; the warning names the path but never the key. Otherwise it fails
// with ErrNoKey.
func Load(path, env string, generate bool) (k rng.Key, warning string, err error) {
	if env != "" {
		if k, ok, err := FromEnv(env); ok || err != nil {
			return k, "", err
		}
	}
	if path != "" {
		k, err := Read(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return k, "", err
		}
	}
	if !generate || path == "" {
		return rng.Key{}, "", fmt.Errorf("%w: set %s or a key file", ErrNoKey, nonEmpty(env, Env))
	}
	k, err = Generate(path)
	if err != nil {
		return rng.Key{}, "", err
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
