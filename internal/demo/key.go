package demo

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/dpstream/dpstream/operator/keyfile"
	"github.com/dpstream/dpstream/privacy/rng"
)

// demoKey returns the noise key: from keyFile, or a fresh random one.
func demoKey(keyFile string) (rng.Key, string, error) {
	if keyFile != "" {
		k, err := keyfile.Read(keyFile)
		if err != nil {
			return rng.Key{}, "", err
		}
		return k, "from " + keyFile, nil
	}
	k, err := keyfile.NewRandomKey()
	if err != nil {
		return rng.Key{}, "", err
	}
	return k, "random for this run (--key-file to fix it)", nil
}

// RandomID returns 8 random hex digits naming a demo run.
func RandomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
