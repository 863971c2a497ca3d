package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// LimitsResult is the machine's own ceiling for the two things a broker does with
// bytes: take them off a socket into a file, and send a file to a socket — in one
// stream, and as a consumer's fetches ask for it, a round of limitsBuffer bytes a
// request (with sendfile, and copied through a buffer for comparison).
type LimitsResult struct {
	Bytes                  int64   `json:"bytes"`
	SinkSeconds            float64 `json:"tcp_sink_seconds"`
	SinkMBPerSec           float64 `json:"tcp_sink_mb_per_sec"`
	SendfileSeconds        float64 `json:"sendfile_seconds"`
	SendfileMBPerSec       float64 `json:"sendfile_mb_per_sec"`
	SendfileRoundsMBPerSec float64 `json:"sendfile_rounds_mb_per_sec"`
	CopyRoundsMBPerSec     float64 `json:"copy_rounds_mb_per_sec"`
}

const limitsBuffer = 1 << 20

// runLimits measures, on loopback: (1) a TCP sink — a client streams size bytes to a
// server that appends them to a file in dir with read/write (no splice), (2) a
// sendfile reader — the server sendfiles that file to a client that discards it, and
// (3) the same file in rounds — the client asks (one byte) and reads limitsBuffer
// bytes, which the server sends with sendfile, or reads and writes, before the next
// request: a consumer's fetch loop against a broker that does nothing else. The file
// is removed afterwards.
func runLimits(ctx context.Context, dir string, size int64, progress io.Writer) (LimitsResult, error) {
	res := LimitsResult{Bytes: size}
	if size <= 0 {
		return res, fmt.Errorf("%w: --size must be > 0", ErrBadFlag)
	}
	f, err := os.CreateTemp(dir, "samsa-bench-limits-*.dat")
	if err != nil {
		return res, fmt.Errorf("bench limits: %w", err)
	}
	path := f.Name()
	defer os.Remove(path)
	defer f.Close()

	sink, err := measureSink(ctx, f, size)
	if err != nil {
		return res, err
	}
	res.SinkSeconds = sink.Seconds()
	res.SinkMBPerSec = float64(size) / mebibyte / res.SinkSeconds
	if progress != nil {
		fmt.Fprintf(progress, "limits: tcp sink to file %.1f MB/s\n", res.SinkMBPerSec)
	}
	send, err := measureSendfile(ctx, path, size)
	if err != nil {
		return res, err
	}
	res.SendfileSeconds = send.Seconds()
	res.SendfileMBPerSec = float64(size) / mebibyte / res.SendfileSeconds
	if progress != nil {
		fmt.Fprintf(progress, "limits: sendfile to socket %.1f MB/s\n", res.SendfileMBPerSec)
	}
	for _, copied := range []bool{false, true} {
		d, err := measureRounds(ctx, path, size, copied)
		if err != nil {
			return res, err
		}
		mbps := float64(size-size%limitsBuffer) / mebibyte / d.Seconds()
		how := "sendfile"
		if copied {
			res.CopyRoundsMBPerSec, how = mbps, "read and write"
		} else {
			res.SendfileRoundsMBPerSec = mbps
		}
		if progress != nil {
			fmt.Fprintf(progress, "limits: %s to socket, %s a request, %.1f MB/s\n", how, formatBytes(limitsBuffer), mbps)
		}
	}
	return res, nil
}

// measureRounds times size/limitsBuffer request-response rounds over loopback: the
// client writes one byte and reads limitsBuffer bytes of the file at path, which the
// server sends with sendfile (or, copied, reads into a buffer and writes).
func measureRounds(ctx context.Context, path string, size int64, copied bool) (time.Duration, error) {
	rounds := size / limitsBuffer
	if rounds == 0 {
		return 0, fmt.Errorf("%w: --size must be at least %s", ErrBadFlag, formatBytes(limitsBuffer))
	}
	ln, done, err := serveOne(func(c net.Conn) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		ask := make([]byte, 1)
		var buf []byte
		if copied {
			buf = make([]byte, limitsBuffer)
		}
		for range rounds {
			if _, err := io.ReadFull(c, ask); err != nil {
				return err
			}
			if copied {
				if _, err := io.ReadFull(f, buf); err != nil {
					return err
				}
				_, err = c.Write(buf)
			} else {
				// A *io.LimitedReader of an *os.File is sendfile(2) too.
				_, err = c.(*net.TCPConn).ReadFrom(io.LimitReader(f, limitsBuffer))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("bench limits: %w", err)
	}
	defer c.Close()
	buf := make([]byte, limitsBuffer)
	start := time.Now()
	for range rounds {
		if _, err = c.Write([]byte{1}); err == nil {
			_, err = io.ReadFull(c, buf)
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			break
		}
	}
	elapsed := time.Since(start)
	if err != nil {
		c.Close()
		<-done
		return 0, fmt.Errorf("bench limits: rounds: %w", err)
	}
	if err := <-done; err != nil {
		return 0, fmt.Errorf("bench limits: rounds: %w", err)
	}
	return elapsed, nil
}

// onlyReader hides a reader's WriteTo so io.CopyBuffer uses the buffer, as a broker
// that looks at the bytes must.
type onlyReader struct{ io.Reader }

// onlyWriter hides a writer's ReadFrom (os.File would splice from the socket).
type onlyWriter struct{ io.Writer }

// serveOne listens on a loopback port and serves the first connection with serve in
// a goroutine; done delivers serve's error (or the accept error). Closing ln ends it.
func serveOne(serve func(c net.Conn) error) (ln net.Listener, done <-chan error, err error) {
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("bench limits: %w", err)
	}
	ch := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- err
			return
		}
		defer c.Close()
		ch <- serve(c)
	}()
	return ln, ch, nil
}

func measureSink(ctx context.Context, f *os.File, size int64) (time.Duration, error) {
	ln, done, err := serveOne(func(c net.Conn) error {
		buf := make([]byte, limitsBuffer)
		n, err := io.CopyBuffer(onlyWriter{f}, onlyReader{c}, buf)
		if err == nil && n != size {
			err = fmt.Errorf("sink got %d of %d bytes", n, size)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	start := time.Now()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("bench limits: %w", err)
	}
	buf := make([]byte, limitsBuffer)
	for i := range buf {
		buf[i] = byte(i)
	}
	var sent int64
	for sent < size && err == nil {
		var n int
		n, err = c.Write(buf[:min(int64(len(buf)), size-sent)])
		sent += int64(n)
	}
	c.Close()
	if err != nil {
		return 0, fmt.Errorf("bench limits: sink client: %w", err)
	}
	if err := <-done; err != nil {
		return 0, fmt.Errorf("bench limits: sink: %w", err)
	}
	return time.Since(start), nil
}

func measureSendfile(ctx context.Context, path string, size int64) (time.Duration, error) {
	ln, done, err := serveOne(func(c net.Conn) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// (*net.TCPConn).ReadFrom(*os.File) is sendfile(2) on Linux.
		_, err = c.(*net.TCPConn).ReadFrom(f)
		return err
	})
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	start := time.Now()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("bench limits: %w", err)
	}
	defer c.Close()
	buf := make([]byte, limitsBuffer)
	n, err := io.CopyBuffer(onlyWriter{io.Discard}, onlyReader{c}, buf)
	elapsed := time.Since(start)
	if err == nil && n != size {
		err = fmt.Errorf("read %d of %d bytes", n, size)
	}
	if serr := <-done; serr != nil && !errors.Is(serr, net.ErrClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return 0, fmt.Errorf("bench limits: sendfile: %w", err)
	}
	return elapsed, nil
}
