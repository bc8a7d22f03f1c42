// Package keyfile finds dpstream's secret noise key outside the pure DP
// core: it reads key files (checking their owner and permission bits),
// reads the key from an environment variable, and generates new key files
// and random keys from the operating system's entropy.
//
// Package privacy/rng owns the Key type and its parsing; it opens no file and
// reads no environment, which its purity test checks. Everything that
// touches the file system or the process environment for a key lives here.
//
// Guarantees: no error or warning of this package contains key material;
// a key file that group or others can access is refused before it is read
// (see ModeOK for the one Kubernetes Secret layout accepted); Generate never
// overwrites an existing file.
package keyfile
