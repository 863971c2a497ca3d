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

// sendFile writes length bytes of f from offset to dst with sendfile(2), passing the
// offset explicitly so the file's seek position is neither used nor moved. The file
// descriptor is held through f's RawConn for the duration, so a concurrent Close of f
// cannot hand the number to another file mid-transfer. EAGAIN returns to the runtime
// poller, which calls again once the socket is writable.
func sendFile(dst syscall.Conn, f *os.File, offset, length int64) error {
	dstRaw, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	srcRaw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var sent int64
	var sendErr error
	ctlErr := srcRaw.Control(func(inFd uintptr) {
		writeErr := dstRaw.Write(func(outFd uintptr) bool {
			for sent < length {
				n, err := unix.Sendfile(int(outFd), int(inFd), &offset, int(min(length-sent, maxSendfileChunk)))
				if n > 0 {
					sent += int64(n)
				}
				switch {
				case err == unix.EAGAIN:
					return false
				case err == unix.EINTR:
					continue
				case err != nil:
					sendErr = err
					return true
				case n == 0:
					sendErr = io.ErrUnexpectedEOF // the file is shorter than the range
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = writeErr
		}
	})
	if sendErr == nil {
		sendErr = ctlErr
	}
	if sendErr != nil {
		return fmt.Errorf("sendfile %s: %d of %d bytes sent: %w", f.Name(), sent, length, sendErr)
	}
	return nil
}
