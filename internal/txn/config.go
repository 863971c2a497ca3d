package txn

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig marks a setting out of its range.
var ErrInvalidConfig = errors.New("txn: invalid config")

// Config holds the coordinator settings, named after Kafka's broker properties. A zero
// field takes Kafka's default (DefaultConfig).
type Config struct {
	// NumPartitions is transaction.state.log.num.partitions (default 50).
	NumPartitions int32
	// MaxTimeout is transaction.max.timeout.ms (default 15 min): the largest
	// transaction.timeout.ms a producer may ask for.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (default 7 days): a
	// transactional id without a transaction in progress that has not been used for
	// this long is forgotten.
	IDExpiration time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (default 10 s): how
	// often transactions that outlived their timeout are looked for and aborted.
	AbortTimedOutInterval time.Duration
	// RemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms (default 1 h): how
	// often expired transactional ids are looked for.
	RemoveExpiredInterval time.Duration
	// WriteTimeout bounds one append to __transaction_state (Kafka uses
	// request.timeout.ms, default 30 s).
	WriteTimeout time.Duration
	// RetryBackoff is how long the coordinator waits before trying again to complete
	// a transaction whose markers or completion record failed (Kafka's
	// retry.backoff.ms for markers, 100 ms).
	RetryBackoff time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		NumPartitions:         50,
		MaxTimeout:            15 * time.Minute,
		IDExpiration:          7 * 24 * time.Hour,
		AbortTimedOutInterval: 10 * time.Second,
		RemoveExpiredInterval: time.Hour,
		WriteTimeout:          30 * time.Second,
		RetryBackoff:          100 * time.Millisecond,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = d.NumPartitions
	}
	set(&c.MaxTimeout, d.MaxTimeout)
	set(&c.IDExpiration, d.IDExpiration)
	set(&c.AbortTimedOutInterval, d.AbortTimedOutInterval)
	set(&c.RemoveExpiredInterval, d.RemoveExpiredInterval)
	set(&c.WriteTimeout, d.WriteTimeout)
	set(&c.RetryBackoff, d.RetryBackoff)
	return c
}

// Validate reports every out-of-range setting at once, naming the Kafka property.
func (c Config) Validate() error {
	var errs []error
	bad := func(prop string, v any, why string) {
		errs = append(errs, fmt.Errorf("%w: %s=%v %s", ErrInvalidConfig, prop, v, why))
	}
	if c.NumPartitions < 0 {
		bad("transaction.state.log.num.partitions", c.NumPartitions, "must be at least 1")
	}
	for _, d := range []struct {
		prop string
		v    time.Duration
	}{
		{"transaction.max.timeout.ms", c.MaxTimeout},
		{"transactional.id.expiration.ms", c.IDExpiration},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", c.AbortTimedOutInterval},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", c.RemoveExpiredInterval},
	} {
		if d.v < 0 {
			bad(d.prop, d.v.Milliseconds(), "must not be negative")
		}
	}
	return errors.Join(errs...)
}
