package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// lagSampler samples the total lag of every consumer group every interval, from the
// console's start, and keeps the last keep samples per group for the lag chart. A
// sample is three requests whatever the number of groups: ListGroups, OffsetFetch
// (batched per coordinator) and ListOffsets for the topics the groups committed to.
type lagSampler struct {
	adm      *kadm.Client
	interval time.Duration
	timeout  time.Duration
	keep     int
	logger   *slog.Logger
	now      func() time.Time

	mu struct {
		sync.Mutex
		series  map[string][]lagPoint // by group, in time order
		lastErr error                 // the last sample's error, nil once one succeeds
	}
}

func newLagSampler(adm *kadm.Client, c Config) *lagSampler {
	s := &lagSampler{adm: adm, interval: c.LagInterval, timeout: c.Timeout, keep: c.LagHistory,
		logger: c.Logger, now: time.Now}
	s.mu.series = map[string][]lagPoint{}
	return s
}

// run samples until ctx ends: once at once, then every interval.
func (s *lagSampler) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce takes one sample of every group; a failure is logged once per change
// and leaves the history as it was.
func (s *lagSampler) sampleOnce(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	listed, totals, err := s.collect(ctx)
	if parent.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.mu.lastErr == nil || s.mu.lastErr.Error() != err.Error() {
			s.logger.Warn("lag sample failed", "err", err)
		}
		s.mu.lastErr = err
		return
	}
	s.mu.lastErr = nil
	s.recordLocked(s.now(), listed, totals)
}

// collect lists the consumer groups and returns the total lag of each it could read.
func (s *lagSampler) collect(ctx context.Context) (listed map[string]bool, totals map[string]int64, err error) {
	groups, err := s.adm.ListGroups(ctx)
	if err := answerErr(groups, err); err != nil {
		return nil, nil, err
	}
	listed = map[string]bool{}
	var names []string
	for _, l := range groups {
		if l.ProtocolType == "consumer" || l.ProtocolType == "" {
			names = append(names, l.Group)
			listed[l.Group] = true
		}
	}
	totals = make(map[string]int64, len(names))
	if len(names) == 0 {
		return listed, totals, nil
	}
	commits := s.adm.FetchManyOffsets(ctx, names...)
	topics := map[string]bool{}
	for _, c := range commits {
		for t := range c.Fetched {
			topics[t] = true
		}
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		ends, err = s.adm.ListEndOffsets(ctx, keys(topics)...)
		if err := answerErr(ends, err); err != nil {
			return nil, nil, err
		}
	}
	for _, name := range names {
		c, ok := commits[name]
		if !ok || c.Err != nil {
			continue // not sampled this time: a gap in its line, not a zero
		}
		totals[name] = totalLag(c.Fetched, ends)
	}
	return listed, totals, nil
}

// totalLag sums end − committed over the partitions with a committed offset, as
// `samsa group describe` counts it.
func totalLag(commits kadm.OffsetResponses, ends kadm.ListedOffsets) int64 {
	var total int64
	commits.Each(func(o kadm.OffsetResponse) {
		end, ok := ends.Lookup(o.Topic, o.Partition)
		if o.Err != nil || o.At < 0 || !ok || end.Err != nil {
			return
		}
		total += max(0, end.Offset-o.At)
	})
	return total
}

// recordLocked appends one sample per sampled group and forgets groups no longer
// listed; a listed group that could not be read this time keeps its history.
func (s *lagSampler) recordLocked(at time.Time, listed map[string]bool, totals map[string]int64) {
	for name := range s.mu.series {
		if !listed[name] {
			delete(s.mu.series, name)
		}
	}
	for name, lag := range totals {
		series := append(s.mu.series[name], lagPoint{At: at, Lag: lag})
		if len(series) > s.keep {
			series = append(series[:0:0], series[len(series)-s.keep:]...)
		}
		s.mu.series[name] = series
	}
}

// history returns a copy of a group's samples, oldest first.
func (s *lagSampler) history(group string) []lagPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]lagPoint(nil), s.mu.series[group]...)
}

// latest returns each group's last sampled lag.
func (s *lagSampler) latest() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.mu.series))
	for name, series := range s.mu.series {
		out[name] = series[len(series)-1].Lag
	}
	return out
}
