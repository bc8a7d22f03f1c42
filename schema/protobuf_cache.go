package schema

// protobuf_cache.go keeps the compiled plain Protobuf schemas: Validate
// and NewDecoder compile protobuf_schema, and the operator makes a
// decoder per fetcher and generation, about a millisecond of compiling
// each. A compiled file descriptor is immutable, so every decoder of the
// same schema text shares one.

import (
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoCacheSize bounds the schema texts kept compiled: a process reads
// one or a few configurations (a test many); past it the oldest text is
// dropped and compiled again when it is met again.
const protoCacheSize = 16

// protoCache is the cache of compilePlainProto; safe for concurrent use.
var protoCache = struct {
	mu    sync.Mutex
	files map[string]protoreflect.FileDescriptor
	order []string // the texts in files, oldest first
}{files: map[string]protoreflect.FileDescriptor{}}

// compilePlainProto is compileProto of a schema without references,
// compiled once per text while the text stays among the protoCacheSize
// most recent ones. Failures are not kept (a text that does not compile
// is an error at validation, and compiled again when met again).
func compilePlainProto(text string) (protoreflect.FileDescriptor, error) {
	c := &protoCache
	c.mu.Lock()
	defer c.mu.Unlock() // held while compiling: a text is compiled once however many decoders meet it
	if fd, ok := c.files[text]; ok {
		return fd, nil
	}
	fd, err := compileProto(text, nil)
	if err != nil {
		return nil, err
	}
	if len(c.order) >= protoCacheSize {
		delete(c.files, c.order[0])
		c.order = c.order[1:]
	}
	c.files[text] = fd
	c.order = append(c.order, text)
	return fd, nil
}
