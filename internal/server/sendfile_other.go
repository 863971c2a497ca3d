//go:build !linux

package server

import (
	"errors"
	"os"
	"syscall"
)

// sendfileSupported is false off Linux: file chunks go through pread.
const sendfileSupported = false

type fileSender struct{}

func newFileSender(syscall.Conn) (*fileSender, error) {
	return nil, errors.New("sendfile not supported on this platform")
}

func (*fileSender) sendFile(*os.File, int64, int64) error {
	return errors.New("sendfile not supported on this platform")
}
