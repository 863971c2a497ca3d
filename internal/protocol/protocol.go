// Package protocol holds the shapes shared by the connection layer (internal/server)
// and the API layer (internal/broker): a decoded request and a response that is either
// a kmsg message or a body made of byte slices and file ranges (for zero-copy Fetch).
//
// It exists so that server does not import broker and broker does not import server.
package protocol

import (
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
)

// Request is one decoded Kafka request.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	Body          kmsg.Request // version already set
	// ClientAddr is the remote address of the connection, for logs and
	// DescribeGroups' client host.
	ClientAddr string
	// Principal is who the connection authenticated as: auth.Anonymous on a
	// PLAINTEXT listener or over SSL without a client certificate.
	Principal auth.Principal
	// ViaToken: the principal authenticated with a delegation token (SCRAM with
	// tokenauth=true).
	ViaToken bool
	// Listener is the name of the listener the request arrived on (PLAINTEXT,
	// SASL_SSL…); "" for a server whose listeners have no names.
	Listener string
	// Size is the request frame's size in bytes (its size prefix included), what
	// producer_byte_rate quotas count.
	Size int
	// ConnID identifies the connection the request arrived on, unique in the process
	// (0: not from a connection). The server reports it again when the connection
	// has closed (server.Config.ConnClosed), so that state tied to a connection can go.
	ConnID uint64
}

// Response is what a handler produces for one request.
//
// Exactly one of Body or Chunks is used; None means no response is sent at all (Produce
// with acks=0). Close asks the server to close the connection after this response.
type Response struct {
	Body   kmsg.Response
	Chunks []Chunk // pre-encoded body (without response header)
	None   bool
	Close  bool
	// Written, if set, is called once the server is done with the response — written,
	// skipped (None) or failed to write — so that its handler can reuse what it holds.
	// It is not called for a response never taken (the connection closed first).
	Written func()
	// Throttle, if positive, mutes the connection: the server reads its next request
	// no sooner than this long after writing the response (a client over its quota,
	// KIP-219).
	Throttle time.Duration
}

// Chunk is part of a pre-encoded response body: either bytes or a range of a file
// that the server writes with sendfile when it can.
type Chunk struct {
	Bytes  []byte
	File   *os.File
	Offset int64
	Length int64
}

// Size returns the number of bytes this chunk contributes to the body.
func (c Chunk) Size() int64 {
	if c.File != nil {
		return c.Length
	}
	return int64(len(c.Bytes))
}

// Handler serves requests. Handle is called sequentially for the requests of one
// connection, in arrival order; it returns a channel on which exactly one Response
// arrives (immediately for most requests, later for delayed operations such as a
// Fetch waiting for min.bytes or an acks=all Produce). The server writes responses
// in request order regardless of the order in which they complete.
type Handler interface {
	Handle(req *Request) <-chan Response
}

// Ready wraps an immediate response in a channel.
func Ready(r Response) <-chan Response {
	ch := make(chan Response, 1)
	ch <- r
	return ch
}

// ProduceHandler is implemented by a Handler that takes Produce requests partition by
// partition as their bytes arrive (see internal/server), so that a request carrying the
// batches of many partitions is never held whole in memory, and each batch is checked
// and appended while its bytes are still in the CPU cache.
type ProduceHandler interface {
	// StartProduce begins a Produce request whose fields before the topics are read.
	// req.Body is nil.
	StartProduce(req *Request, h ProduceHeader) ProduceStream
}

// ProduceHeader holds the fields of a Produce request that precede its topics.
type ProduceHeader struct {
	TransactionalID *string
	Acks            int16
	TimeoutMillis   int32
	// Topics is the number of topics that follow.
	Topics int
}

// ProduceStream receives the topics and partitions of one Produce request in request
// order, then Finish — or Abort when the request cannot be read whole (the connection
// is then closed). A stream is used by one goroutine.
type ProduceStream interface {
	// Topic begins a topic that has partitions partitions, named by name (versions
	// before 13) or by id (13 and later; name is then "").
	Topic(name string, id [16]byte, partitions int)
	// Partition hands over one partition's records (nil when null); records is valid
	// only during the call.
	Partition(partition int32, records []byte)
	// Finish ends the request: the response is resp, or arrives on later when later is
	// not nil.
	Finish() (resp Response, later <-chan Response)
	// Abort ends a request that could not be read whole.
	Abort()
}
