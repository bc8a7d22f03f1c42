package privacy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testKeyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func TestKeyNeverPrints(t *testing.T) {
	k, err := ParseKeyHex(testKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		fmt.Fprintf(&sb, verb+"|", k)
	}
	fmt.Fprintf(&sb, "%v|", struct{ K Key }{k})
	fmt.Fprintf(&sb, "%v|", &k)
	sb.WriteString(k.String() + k.GoString())
	j, err := json.Marshal(struct{ K Key }{k})
	if err != nil {
		t.Fatal(err)
	}
	sb.Write(j)
	h := slog.NewTextHandler(&sb, nil)
	slog.New(h).Info("key", "k", k)
	out := strings.ToLower(sb.String())
	// No two consecutive key bytes, in hex or decimal, may appear.
	for _, leak := range []string{"0011", "2233", "aabb", "ccdd", "[0 17", "0 17 34", "\\x00\\x11"} {
		if strings.Contains(out, leak) {
			t.Errorf("key material %q printed in %q", leak, out)
		}
	}
	if !strings.Contains(out, "redacted") {
		t.Errorf("expected redacted output, got %q", out)
	}
}

func TestParseKey(t *testing.T) {
	want, _ := ParseKeyHex(testKeyHex)
	raw := want
	cases := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"hex", []byte(testKeyHex), true},
		{"hex with newline", []byte(testKeyHex + "\n"), true},
		{"upper-case hex", []byte(strings.ToUpper(testKeyHex)), true},
		{"raw", raw[:], true},
		{"short hex", []byte(testKeyHex[:62]), false},
		{"not hex", []byte(strings.Repeat("zz", KeySize)), false},
		{"all zero", make([]byte, KeySize), false},
		{"empty", nil, false},
	}
	for _, c := range cases {
		k, err := ParseKey(c.data)
		if c.ok && (err != nil || k != want) {
			t.Errorf("%s: ParseKey = %v, %v", c.name, k == want, err)
		}
		if !c.ok && !errors.Is(err, ErrKey) {
			t.Errorf("%s: error %v, want ErrKey", c.name, err)
		}
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "zz") {
			t.Errorf("%s: error echoes the input: %v", c.name, err)
		}
	}
}

func TestReadKeyFilePermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte(testKeyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err != nil {
		t.Fatalf("0600 key file rejected: %v", err)
	}
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o644, 0o660, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadKeyFile(path)
		if !errors.Is(err, ErrKeyPermissions) {
			t.Errorf("mode %04o: error %v, want ErrKeyPermissions", mode, err)
			continue
		}
		if !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "0011") {
			t.Errorf("mode %04o: unhelpful or leaking error %q", mode, err)
		}
	}
	if _, err := ReadKeyFile(dir); err == nil {
		t.Error("a directory was accepted as key file")
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("hunter2-malformed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(bad); !errors.Is(err, ErrKey) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("malformed key file: %v", err)
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "generated.key")
	const env = "DPSTREAM_TEST_KEY_LOADKEY"
	t.Setenv(env, "")

	if _, _, err := LoadKey(path, env, false); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key, no generation: %v", err)
	}
	k1, warn, err := LoadKey(path, env, true)
	if err != nil || warn == "" || k1.IsZero() {
		t.Fatalf("generate: key zero %v, warning %q, err %v", k1.IsZero(), warn, err)
	}
	if !strings.Contains(warn, path) {
		t.Errorf("warning does not name the file: %q", warn)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("generated key file mode %v, %v", st.Mode().Perm(), err)
	}
	k2, warn, err := LoadKey(path, env, true)
	if err != nil || warn != "" || k2 != k1 {
		t.Fatalf("reload: same %v, warning %q, err %v", k2 == k1, warn, err)
	}
	if _, err := GenerateKeyFile(path); !errors.Is(err, fs.ErrExist) {
		t.Errorf("GenerateKeyFile overwrote an existing file: %v", err)
	}

	t.Setenv(env, testKeyHex)
	k3, _, err := LoadKey(path, env, true)
	if want, _ := ParseKeyHex(testKeyHex); err != nil || k3 != want {
		t.Errorf("environment key not preferred: %v", err)
	}
	t.Setenv(env, "not-a-key")
	if _, _, err := LoadKey(path, env, true); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), env) || strings.Contains(err.Error(), "not-a-key") {
		t.Errorf("bad environment key: %v", err)
	}
}

// TestKeyModeOK: the permission rule of ReadKeyFile, including the one
// group-readable layout accepted (a Kubernetes Secret file seen by a
// non-root container with an fsGroup: 0440, owned by root, group one of
// the process's).
func TestKeyModeOK(t *testing.T) {
	secret := fileOwner{uid: 0, gid: 65532, known: true}
	for _, c := range []struct {
		name   string
		perm   fs.FileMode
		owner  fileOwner
		euid   int
		groups []int
		want   bool
	}{
		{"0600", 0o600, fileOwner{uid: 1000, gid: 1000, known: true}, 1000, []int{1000}, true},
		{"0400", 0o400, fileOwner{uid: 1000, gid: 1000, known: true}, 1000, []int{1000}, true},
		{"0400 on a platform without owners", 0o400, fileOwner{}, 1000, nil, true},
		{"k8s secret with fsGroup", 0o440, secret, 65532, []int{65532}, true},
		{"k8s secret, fsGroup a supplementary group", 0o440, secret, 65532, []int{100, 65532}, true},
		{"0440 as root", 0o440, secret, 0, []int{65532}, false},
		{"0440 not our group", 0o440, secret, 65532, []int{100}, false},
		{"0440 not owned by root", 0o440, fileOwner{uid: 1000, gid: 65532, known: true}, 65532, []int{65532}, false},
		{"0440 owner unknown", 0o440, fileOwner{}, 65532, []int{65532}, false},
		{"0460 group write", 0o460, secret, 65532, []int{65532}, false},
		{"0444 others read", 0o444, secret, 65532, []int{65532}, false},
		{"0450 group exec", 0o450, secret, 65532, []int{65532}, false},
		{"0404", 0o404, secret, 65532, []int{65532}, false},
	} {
		if got := keyModeOK(c.perm, c.owner, c.euid, c.groups); got != c.want {
			t.Errorf("%s: keyModeOK = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestReadKeyFileGroupReadOwnFile: a 0440 key file owned by the process's
// own user (not the Kubernetes layout) is still refused.
func TestReadKeyFileGroupReadOwnFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(testKeyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o440); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); !errors.Is(err, ErrKeyPermissions) {
		t.Errorf("0440 key file of uid %d: error %v, want ErrKeyPermissions", os.Geteuid(), err)
	}
}
