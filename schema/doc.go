// Package schema decodes input events and encodes and decodes the release
// messages that dpstream publishes.
package schema
