// Package coordkey maps a coordinator key — a group id, a transactional id, a share
// partition's state key — to the partition of its internal topic that holds it, as
// Kafka does, so that every broker and client agrees on the coordinator.
package coordkey

import "unicode/utf16"

// Partition is Kafka's partition of key among n: Utils.abs(key.hashCode()) % n, with
// Java's String.hashCode over the key's UTF-16 code units (Utils.abs maps the
// smallest int to 0).
func Partition(key string, n int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}
