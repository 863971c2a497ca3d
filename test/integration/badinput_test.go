package integration

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
