package server

import "time"

// Request frames of the APIs whose handlers keep no reference to them once Handle has
// returned (Config.ReusableFrames), and the windows streamed Produce requests are read
// through, come from the server's bufpool.Pool, whatever their size up to
// MaxRequestSize, so that the produce path allocates and zeroes no memory per request
// and the garbage collector has nothing to collect. Buffers idle for frameIdle are
// dropped, so memory held after a burst goes back to the runtime.
//
// A size prefix alone never makes the server take a large buffer: a connection starts
// with a budget of frameBudget bytes, reads a larger frame in steps that double as the
// bytes arrive (each step a buffer of the next class; the smaller buffers of the steps
// are left to the garbage collector, as they would only sit in the pool), and raises
// its budget to the largest frame it has delivered. A client that sends frames of the
// same size every time — a producer — thus gets a buffer of the right class at once from
// its second request on, and the memory held for it is bounded by the frames its
// connections are reading or handling, not by the rate.
const (
	frameBudget = 1 << 20
	// frameIdle is how long a free buffer is kept.
	frameIdle = 10 * time.Second
)
