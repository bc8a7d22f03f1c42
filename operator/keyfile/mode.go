package keyfile

import (
	"io/fs"
	"os"
)

// fileOwner is what keyModeOK needs to know about a key file beyond its
// permission bits.
type fileOwner struct {
	uid, gid uint32
	known    bool // false where the platform does not say (not Unix)
}

// keyModeOK reports whether a key file with permission bits perm and owner
// o may be read by a process with effective user id euid and groups
// (effective and supplementary). Two layouts are accepted:
//
//   - no bits for group or others (0600, 0400): the usual file;
//   - group read and nothing else for group or others (0440; 0640 too, the
//     owner's bits do not matter for a root-owned file), owned by root,
//     its group one of the process's, the process not root: a Kubernetes
//     Secret volume mounted for a non-root container with an fsGroup. The
//     kubelet makes every file of such a volume root-owned and adds group
//     read for the pod's fsGroup whatever defaultMode says
//     (kubernetes/kubernetes#57923), so a non-root container can read a
//     Secret file only this way. Every container of the pod (and every pod
//     with the same fsGroup) is in that group: what keeps the key the
//     sidecar's is that only its container mounts the volume and the pod
//     does not share its process namespace. On an ordinary host, a
//     root-owned 0440 file is readable by every member of its group;
//     prefer 0600 or 0400 owned by dpstream's user there.
//
// Bits for others, and group write or execute, are never accepted.
func keyModeOK(perm fs.FileMode, o fileOwner, euid int, groups []int) bool {
	perm &= fs.ModePerm
	if perm&0o077 == 0 {
		return true
	}
	if perm&0o077 != 0o040 || !o.known || o.uid != 0 || euid == 0 {
		return false
	}
	for _, g := range groups {
		if g >= 0 && uint32(g) == o.gid {
			return true
		}
	}
	return false
}

// ModeOK reports whether a key file with these attributes (from
// os.Stat) passes Read's permission rule for this process, so that
// a configuration check can say the same as the read will.
func ModeOK(fi fs.FileInfo) bool {
	return keyModeOK(fi.Mode().Perm(), ownerOf(fi), os.Geteuid(), processGroups())
}
