package broker

import (
	"runtime/debug"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

type handlerFunc func(b *Broker, req *protocol.Request) <-chan protocol.Response

type apiEntry struct {
	min, max int16
	fn       handlerFunc
}

var registry = map[int16]apiEntry{}

// register adds an API handler and its served version range. It is called from init
// functions, one per API file.
func register(key kmsg.Key, min, max int16, fn handlerFunc) {
	if _, dup := registry[int16(key)]; dup {
		panic("broker: API registered twice: " + kmsg.NameForKey(int16(key)))
	}
	if req := kmsg.RequestForKey(int16(key)); req == nil || req.MaxVersion() < max {
		panic("broker: served version above what kmsg can decode: " + kmsg.NameForKey(int16(key)))
	}
	registry[int16(key)] = apiEntry{min: min, max: max, fn: fn}
}

// Versions reports the served version range of an API key.
func Versions(key int16) (min, max int16, ok bool) {
	e, ok := registry[key]
	return e.min, e.max, ok
}

// APIKeys lists every served API with its version range, sorted by key.
func APIKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(registry))
	for k, e := range registry {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: e.min, MaxVersion: e.max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// later runs h in a goroutine of its own and relays its answer, so that the
// connection reads its next requests meanwhile. It is for handlers that wait on other
// nodes: WriteTxnMarkers and the share coordinator's, whose writes wait for their
// replication. A connection hands Handle one request at a time, so a handler that
// waits in Handle makes every later request of that connection wait behind it, and
// one broker's share-state requests to another all come on one connection.
func later(h handlerFunc) handlerFunc {
	return func(b *Broker, req *protocol.Request) <-chan protocol.Response {
		out := make(chan protocol.Response, 1)
		b.answerLater(req, out, func() { out <- <-h(b, req) })
		return out
	}
}

// answerLater runs fn, which answers req on out, in a goroutine of its own: a handler
// whose answer waits (a long poll, acknowledgements, another node) returns out at
// once. A panic in fn, a bug, is logged with its stack and closes req's connection
// (out is closed), as a panic of a handler itself does in internal/server: one
// request does not end the process.
func (b *Broker) answerLater(req *protocol.Request, out chan protocol.Response, fn func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				b.logger.Error("request handler panicked; closing the connection",
					"api_key", req.Key, "version", req.Version, "client", req.ClientAddr,
					"panic", r, "stack", string(debug.Stack()))
				close(out)
			}
		}()
		fn()
	}()
}

// reply wraps a finished response.
func reply(r kmsg.Response) <-chan protocol.Response {
	return protocol.Ready(protocol.Response{Body: r})
}
