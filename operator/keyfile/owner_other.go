//go:build !unix

package keyfile

import "io/fs"

// ownerOf: not known on this platform (only 0600/0400 key files pass).
func ownerOf(fs.FileInfo) fileOwner { return fileOwner{} }

// processGroups: none on this platform.
func processGroups() []int { return nil }
