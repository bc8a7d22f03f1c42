//go:build unix

package keyfile

import (
	"io/fs"
	"os"
	"syscall"
)

// ownerOf returns the owner and group of a file from its Stat_t.
func ownerOf(fi fs.FileInfo) fileOwner {
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileOwner{}
	}
	return fileOwner{uid: s.Uid, gid: s.Gid, known: true}
}

// processGroups returns the effective group id and the supplementary
// groups of this process.
func processGroups() []int {
	gs, _ := os.Getgroups()
	return append(gs, os.Getegid())
}
