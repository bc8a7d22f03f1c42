package keyfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
)

const testKeyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func TestReadKeyFilePermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte(testKeyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err != nil {
		t.Fatalf("0600 key file rejected: %v", err)
	}
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o644, 0o660, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Read(path)
		if !errors.Is(err, ErrPermissions) {
			t.Errorf("mode %04o: error %v, want ErrPermissions", mode, err)
			continue
		}
		if !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "0011") {
			t.Errorf("mode %04o: unhelpful or leaking error %q", mode, err)
		}
	}
	if _, err := Read(dir); err == nil {
		t.Error("a directory was accepted as key file")
	}
	if _, err := Read(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("hunter2-malformed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad); !errors.Is(err, rng.ErrKey) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("malformed key file: %v", err)
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "generated.key")
	const env = "DPSTREAM_TEST_KEY_LOADKEY"
	t.Setenv(env, "")

	if _, _, err := Load(path, env, false); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key, no generation: %v", err)
	}
	k1, warn, err := Load(path, env, true)
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
	k2, warn, err := Load(path, env, true)
	if err != nil || warn != "" || k2 != k1 {
		t.Fatalf("reload: same %v, warning %q, err %v", k2 == k1, warn, err)
	}
	if _, err := Generate(path); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Generate overwrote an existing file: %v", err)
	}

	t.Setenv(env, testKeyHex)
	k3, _, err := Load(path, env, true)
	if want, _ := rng.ParseKeyHex(testKeyHex); err != nil || k3 != want {
		t.Errorf("environment key not preferred: %v", err)
	}
	t.Setenv(env, "not-a-key")
	if _, _, err := Load(path, env, true); !errors.Is(err, rng.ErrKey) || !strings.Contains(err.Error(), env) || strings.Contains(err.Error(), "not-a-key") {
		t.Errorf("bad environment key: %v", err)
	}
}

// TestKeyModeOK: the permission rule of Read, including the one
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
	if _, err := Read(path); !errors.Is(err, ErrPermissions) {
		t.Errorf("0440 key file of uid %d: error %v, want ErrPermissions", os.Geteuid(), err)
	}
}
