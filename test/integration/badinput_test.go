package integration

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// expectClosed reads from conn until the broker closes it (or the deadline passes).
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1024)
	for {
		_, err := conn.Read(buf)
		if err == io.EOF || (err != nil && !isTimeout(err)) {
			return
		}
		if isTimeout(err) {
			t.Fatal("broker did not close the connection")
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func requestHeader(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
}

// TestBadInput sends malformed traffic on raw connections; each bad connection is
// closed (or answered with an error), while a well-behaved client keeps working and
// the data already written stays intact.
func TestBadInput(t *testing.T) {
	b := testutil.StartBroker(t, "socket.request.max.bytes=1048576")
	createTopic(t, newAdmin(t, b), "safe", 1, nil)
	good := newClient(t, b, kgo.DefaultProduceTopic("safe"))
	for i := 0; i < 20; i++ {
		produceSync(t, good, &kgo.Record{Value: value(i)})
	}

	cases := map[string][]byte{
		"garbage":                     []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"oversize prefix":             binary.BigEndian.AppendUint32(nil, 1<<30),
		"negative size":               binary.BigEndian.AppendUint32(nil, 0xfffffff0),
		"unknown api key":             frame(requestHeader(9999, 0, 1)),
		"truncated header":            frame([]byte{0, 3}),
		"bad body":                    frame(append(requestHeader(int16(kmsg.Metadata), 9, 7), 0xff, 0xff, 0xff)),
		"unsupported produce version": frame(requestHeader(int16(kmsg.Produce), 0, 3)),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", b.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(payload); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, conn)
		})
	}

	t.Run("truncated frame then close", func(t *testing.T) {
		conn, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		// Announce 100 bytes, send 10, hang up: the broker must just drop it.
		conn.Write(append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...))
		conn.Close()
	})

	t.Run("ApiVersions at an unsupported version answers v0 UNSUPPORTED_VERSION", func(t *testing.T) {
		conn, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write(frame(requestHeader(int16(kmsg.ApiVersions), 99, 42)))
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != 42 {
			t.Fatalf("correlation id %d", corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0)
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 35 || len(resp.ApiKeys) == 0 {
			t.Fatalf("error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
		}
	})

	// The good client still works and the data is intact.
	produceSync(t, good, &kgo.Record{Value: value(20)})
	got := consumePartition(t, b, "safe", 0)
	if len(got) != 21 {
		t.Fatalf("%d records, want 21", len(got))
	}
	for i, v := range got {
		if v != string(value(i)) {
			t.Fatalf("record %d = %s", i, v)
		}
	}
}

// TestCorruptBatchRefused: a produce with a flipped CRC byte gets CORRUPT_MESSAGE and
// nothing is stored.
func TestCorruptBatchRefused(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "crc", 1, nil)
	c := newClient(t, b)
	batch := rawBatch(-1, -1, -1, "payload")
	batch[len(batch)-2] ^= 0x55
	resp := produceRaw(t, c, "crc", batch)
	if resp.ErrorCode != 2 {
		t.Fatalf("error %d, want CORRUPT_MESSAGE (2)", resp.ErrorCode)
	}
	ok := produceRaw(t, c, "crc", rawBatch(-1, -1, -1, "fine"))
	if ok.ErrorCode != 0 || ok.BaseOffset != 0 {
		t.Fatalf("good batch after a corrupt one: %+v", ok)
	}
}

// TestCompressionBombsBoundMemory: many connections at once each send a small zstd
// batch that expands to 64 MiB: zeros (not records), or one 64 MiB record while the
// header states two. Each is refused (INVALID_RECORD or CORRUPT_MESSAGE), nothing is
// stored, and the broker's peak resident memory rises by no more than a zstd window
// and a walk buffer per connection, not by what the batches expand to: a compressed
// batch's records are walked as they are decompressed.
func TestCompressionBombsBoundMemory(t *testing.T) {
	const connections, expanded = 16, 64 << 20
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "bombs", 1, nil)
	bombs := [][]byte{zstdBomb(t, make([]byte, expanded), 1), zstdBomb(t, hugeRecord(expanded), 2)}
	clients := make([]*kgo.Client, connections)
	for i := range clients {
		clients[i] = newClient(t, b)
		produceRaw(t, clients[i], "bombs", rawBatch(-1, -1, -1, "warm-up")) // connected, metadata loaded
	}
	before := peakRSS(t, b.Pid())

	codes := make(chan int16, connections)
	var wg sync.WaitGroup
	for i, c := range clients {
		// Walking 64 MiB takes a race-built broker about a second of CPU per batch,
		// and the batches share two processors with the rest of the suite.
		wg.Go(func() { codes <- produceRawWithin(t, c, nil, "bombs", bombs[i%2], 2*time.Minute).ErrorCode })
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != kerr.InvalidRecord.Code && code != kerr.CorruptMessage.Code {
			t.Fatalf("a batch expanding to %d bytes: %v; want INVALID_RECORD or CORRUPT_MESSAGE",
				expanded, kerr.ErrorForCode(code))
		}
	}
	after := peakRSS(t, b.Pid())
	t.Logf("%d connections, each a batch of %d or %d KiB expanding to %d MiB: peak RSS %d MiB before, %d MiB after",
		connections, len(bombs[0])>>10, len(bombs[1])>>10, expanded>>20, before>>20, after>>20)
	// Per connection: the zstd decoder's 8 MiB window (record.zstdMaxWindow) with its
	// block space, the 128 KiB walk buffer, and the request itself.
	perConnectionBound := 10 << 20
	if raceEnabled {
		perConnectionBound *= 3 // measured: 264 MiB over 16 connections
	}
	if limit := before + connections*perConnectionBound; after > limit {
		t.Errorf("peak RSS rose from %d to %d MiB, past %d MiB: more than %d MiB per connection",
			before>>20, after>>20, limit>>20, perConnectionBound>>20)
	}
	end, err := kadm.NewClient(clients[0]).ListEndOffsets(ctxT(t, 10*time.Second), "bombs")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("bombs", 0); o.Offset != connections {
		t.Fatalf("log end offset %d, want %d (the warm-up records only)", o.Offset, connections)
	}
}

// TestRecompressBoundsMemory: a topic whose compression.type differs from the
// producer's has every batch re-encoded by the broker, which costs the batch's
// decompressed bytes, not a decoded record each: a small zstd batch of 2,000,000
// records of 8 bytes (18 MiB once decompressed) is stored, recompressed with gzip,
// for a rise in the broker's peak memory well under what the records' decoded form
// cost (a rise of 310 MiB, when the broker built it).
func TestRecompressBoundsMemory(t *testing.T) {
	const n = 2_000_000
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "regzip", 1, map[string]*string{
		"compression.type": kadm.StringPtr("gzip"), "max.message.bytes": kadm.StringPtr("67108864")})
	var records []byte
	for i := range n {
		body := []byte{0, 0} // attributes, timestamp delta
		body = binary.AppendVarint(body, int64(i))
		body = append(body, 1, 1, 0) // null key, null value, no headers
		records = append(binary.AppendVarint(records, int64(len(body))), body...)
	}
	batch := zstdBomb(t, records, n)
	// The recompression takes seconds under -race on a loaded machine: the client
	// must not give up on the connection and send the batch again (it would be
	// stored twice: the producer is not idempotent).
	c := newClient(t, b, kgo.RequestTimeoutOverhead(2*time.Minute))
	produceRaw(t, c, "regzip", rawBatch(-1, -1, -1, "warm-up"))
	before := peakRSS(t, b.Pid())
	if r := produceRawWithin(t, c, nil, "regzip", batch, 2*time.Minute); r.ErrorCode != 0 {
		t.Fatalf("a batch of %d records (%d KiB, %d MiB decompressed): %v", n, len(batch)>>10, len(records)>>20, kerr.ErrorForCode(r.ErrorCode))
	}
	after := peakRSS(t, b.Pid())
	t.Logf("a zstd batch of %d KiB, %d MiB decompressed, recompressed with gzip: peak RSS %d MiB before, %d MiB after",
		len(batch)>>10, len(records)>>20, before>>20, after>>20)
	// The decompressed records, gzip's output and the request, with the garbage their
	// growing buffers leave: measured 76 MiB (the decoded records took 310 MiB).
	bound := 128 << 20
	if raceEnabled {
		bound *= 3
	}
	if after > before+bound {
		t.Errorf("peak RSS rose from %d to %d MiB, more than %d MiB", before>>20, after>>20, bound>>20)
	}
	end, err := kadm.NewClient(c).ListEndOffsets(ctxT(t, 10*time.Second), "regzip")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("regzip", 0); o.Offset != n+1 {
		t.Fatalf("log end offset %d, want %d", o.Offset, n+1)
	}
}

// zstdBomb is a v2 batch stating numRecords records whose zstd payload is records.
func zstdBomb(t *testing.T, records []byte, numRecords int32) []byte {
	t.Helper()
	payload, err := record.Compress(record.CompressionZstd, nil, records)
	if err != nil {
		t.Fatal(err)
	}
	return encodeBatch(int16(record.CompressionZstd), -1, -1, -1, numRecords, payload)
}

// hugeRecord is one encoded record of n bytes: offset delta 0, a null key and a
// value of zeros.
func hugeRecord(n int) []byte {
	appendVarint := func(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }
	value := n - 16
	body := []byte{0, 0, 0, 1} // attributes, timestamp delta, offset delta, null key
	body = appendVarint(body, int64(value))
	body = append(body, make([]byte, value)...)
	body = append(body, 0) // no headers
	return append(appendVarint(nil, int64(len(body))), body...)
}

// peakRSS is process pid's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(kb), " kB"))
			if err != nil {
				t.Fatalf("VmHWM of %q: %v", line, err)
			}
			return n << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
