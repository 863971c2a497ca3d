// Package protocol holds the shapes shared by the connection layer (internal/server)
// and the API layer (internal/broker): a decoded request and a response that is either
// a kmsg message or a body made of byte slices and file ranges (for zero-copy Fetch).
//
// It exists so that server does not import broker and broker does not import server.
package protocol

import (
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"
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
