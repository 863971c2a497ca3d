package broker

import (
	"runtime/debug"
	"sort"
	"sync/atomic"
	"time"

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

// answerLater runs fn, which answers req on out, on a goroutine of laterWorkers: a
// handler whose answer waits (a long poll, acknowledgements, another node) returns out
// at once. A panic in fn, a bug, is logged with its stack and closes req's connection
// (out is closed), as a panic of a handler itself does in internal/server: one
// request does not end the process.
func (b *Broker) answerLater(req *protocol.Request, out chan protocol.Response, fn func()) {
	b.later.run(func() {
		defer func() {
			if r := recover(); r != nil {
				b.logger.Error("request handler panicked; closing the connection",
					"api_key", req.Key, "version", req.Version, "client", req.ClientAddr,
					"panic", r, "stack", string(debug.Stack()))
				close(out)
			}
		}()
		fn()
	})
}

// laterWorkers are the goroutines answerLater runs its functions on, kept for the next
// one rather than started for each: a waiting request's stack grows deep (a share
// fetch acquires, reads the log and writes its share state from it), and a new
// goroutine starts with a small stack it copies each time it outgrows it — about 4 %
// of the broker's CPU where half the share fetches waited (docs/performance.md). A
// worker that has run a function takes the next one handed over while it is idle,
// and ends after laterIdle without one, or when the broker stops serving.
type laterWorkers struct {
	work chan func() // unbuffered: a function goes only to a worker idle now
	done <-chan struct{}
	// started and live count the workers started and not yet ended.
	started, live atomic.Int64
}

const laterIdle = 2 * time.Second

// run runs fn on an idle worker, or on a new one when none is idle.
func (w *laterWorkers) run(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.loop(fn)
	}
}

func (w *laterWorkers) loop(fn func()) {
	w.started.Add(1)
	w.live.Add(1)
	defer w.live.Add(-1)
	idle := time.NewTimer(laterIdle)
	defer idle.Stop()
	for {
		fn()
		fn = nil // what the request held is not kept while the worker idles
		idle.Reset(laterIdle)
		select {
		case fn = <-w.work:
		case <-idle.C:
			return
		case <-w.done:
			return
		}
	}
}

// reply wraps a finished response.
func reply(r kmsg.Response) <-chan protocol.Response {
	return protocol.Ready(protocol.Response{Body: r})
}
