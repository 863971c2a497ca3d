package server

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const sendfileSupported = true

// maxSendfileChunk is the most Linux transfers in one sendfile call.
const maxSendfileChunk = 0x7ffff000

// fileSender writes file ranges to one connection with sendfile(2). It is made once
// per connection, with its callbacks bound once, so that a Fetch response of a
// thousand partitions — a range each — allocates nothing but each file's RawConn.
// Used under the connection's writeMu.
type fileSender struct {
	dst syscall.RawConn

	inFd                 uintptr
	offset, length, sent int64
	err                  error
	control              func(fd uintptr)
	write                func(fd uintptr) bool
}

func newFileSender(dst syscall.Conn) (*fileSender, error) {
	raw, err := dst.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &fileSender{dst: raw}
	s.control, s.write = s.withFile, s.send
	return s, nil
}

// sendFile writes length bytes of f from offset with sendfile(2), passing the offset
// explicitly so the file's seek position is neither used nor moved. The file
// descriptor is held through f's RawConn for the duration, so a concurrent Close of f
// cannot hand the number to another file mid-transfer. EAGAIN returns to the runtime
// poller, which calls again once the socket is writable.
func (s *fileSender) sendFile(f *os.File, offset, length int64) error {
	src, err := f.SyscallConn()
	if err != nil {
		return err
	}
	s.offset, s.length, s.sent, s.err = offset, length, 0, nil
	if cerr := src.Control(s.control); s.err == nil {
		s.err = cerr
	}
	if s.err != nil {
		return fmt.Errorf("sendfile %s: %d of %d bytes sent: %w", f.Name(), s.sent, length, s.err)
	}
	return nil
}

func (s *fileSender) withFile(fd uintptr) {
	s.inFd = fd
	if werr := s.dst.Write(s.write); s.err == nil {
		s.err = werr
	}
}

// send is the socket's write callback: it reports true when done (or failed).
func (s *fileSender) send(outFd uintptr) bool {
	for s.sent < s.length {
		n, err := unix.Sendfile(int(outFd), int(s.inFd), &s.offset, int(min(s.length-s.sent, maxSendfileChunk)))
		if n > 0 {
			s.sent += int64(n)
		}
		switch {
		case err == unix.EAGAIN:
			return false
		case err == unix.EINTR:
			continue
		case err != nil:
			s.err = err
			return true
		case n == 0:
			s.err = io.ErrUnexpectedEOF // the file is shorter than the range
			return true
		}
	}
	return true
}
