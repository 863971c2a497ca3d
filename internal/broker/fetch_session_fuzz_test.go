package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzFetchSession drives one fetch session through a sequence of incremental fetches
// read from the input — each adds or updates partitions (repeats included), forgets
// some (known or not), and is answered with some partitions served and the byte limit
// reached or not — and checks after every step that the session's indexes agree: each
// partition of the effective request is in the session's map at its place, the map
// holds nothing else, no partition appears twice, a topic's index points to its last
// entry, and the partitions are those added and not forgotten since.
func FuzzFetchSession(f *testing.F) {
	f.Add([]byte{0x01, 0x12, 0x80, 0x23, 0x40, 0x05, 0x91, 0xff})
	f.Add([]byte{0x0f, 0x3c, 0xc1, 0x00, 0x77, 0x88, 0x19, 0x2a, 0x3b, 0x4c})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var fs fetchSessions
		fs.init(4)
		now := time.Now()
		type tp = sessionPart
		// A byte names a partition: bit 2 the topic (a or b), bits 0-1 the partition
		// (-1 to 2: clients may send any number).
		name := func(x byte) tp { return tp{[]string{"a", "b"}[x>>2&1], int32(x&3) - 1} }
		want := map[tp]bool{}
		var s *fetchSession
		check := func(step int) {
			t.Helper()
			seen := map[tp]bool{}
			for ti := range s.topics {
				rt := &s.topics[ti]
				if len(s.byIndex[ti]) != len(rt.Partitions) {
					t.Fatalf("step %d: topic entry %d has %d partitions and %d indexed", step, ti, len(rt.Partitions), len(s.byIndex[ti]))
				}
				if len(rt.Partitions) == 0 {
					t.Fatalf("step %d: topic entry %d is empty", step, ti)
				}
				for pi, rp := range rt.Partitions {
					x := tp{rt.Topic, rp.Partition}
					sp := s.partitions[s.key(rt, rp.Partition)]
					if seen[x] || sp == nil || sp.topicIndex != ti || sp.partIndex != pi || s.byIndex[ti][pi] != sp {
						t.Fatalf("step %d: %v at [%d][%d]: repeated %v, or its map entry %+v is elsewhere", step, x, ti, pi, seen[x], sp)
					}
					seen[x] = true
				}
				if last := slices.IndexFunc(s.topics[ti+1:], func(o kmsg.FetchRequestTopic) bool { return o.Topic == rt.Topic }); last < 0 && s.topicIndex[s.key(rt, -1)] != ti {
					t.Fatalf("step %d: topic %s's index is %d, its last entry %d", step, rt.Topic, s.topicIndex[s.key(rt, -1)], ti)
				}
			}
			if len(seen) != len(s.partitions) || len(seen) != len(want) {
				t.Fatalf("step %d: %d partitions in the request, %d in the map, want %d", step, len(seen), len(s.partitions), len(want))
			}
			for x := range want {
				if !seen[x] {
					t.Fatalf("step %d: %v missing", step, x)
				}
			}
		}
		epoch := int32(0)
		for step := 0; len(ops) >= 3; step++ {
			// Three bytes a step: how many to add (low nibble) and forget (high nibble),
			// whether the limit was reached (bit 7 of the second), then the partition
			// bytes, which also say which partitions were served (bit 3).
			counts, flags := ops[0], ops[1]
			nAdd, nForget := int(counts&7), int(counts>>4&3)
			ops = ops[2:]
			if len(ops) < nAdd+nForget {
				return
			}
			var add, forget []tp
			for _, x := range ops[:nAdd] {
				add = append(add, name(x))
			}
			for _, x := range ops[nAdd : nAdd+nForget] {
				forget = append(forget, name(x))
			}
			served := map[tp]bool{}
			for _, x := range ops[:nAdd+nForget] {
				if x&8 != 0 {
					served[name(x)] = true
				}
			}
			ops = ops[nAdd+nForget:]
			var id int32
			if s != nil {
				id = s.id
			}
			r := sessionRequest(id, epoch, add, forget)
			eff, use, code := fs.begin(r, now)
			if epoch > 0 { // the full fetch that opens the session forgets nothing
				for _, x := range forget {
					delete(want, x)
				}
			}
			for _, x := range add {
				want[x] = true
			}
			if epoch > 0 && len(want) == 0 { // emptied: closed, answered without a session
				if code != 0 || use.session != nil || fs.Len() != 0 {
					t.Fatalf("step %d: emptied at epoch %d: code %d, session %v, %d cached", step, epoch, code, use.session, fs.Len())
				}
				s, epoch = nil, 0
				continue
			}
			if code != 0 || use.session == nil {
				t.Fatalf("step %d: epoch %d: code %d", step, epoch, code)
			}
			s = use.session
			check(step)
			var topics []fetchTopicResult
			for _, rt := range eff.Topics {
				res := fetchTopicResult{name: rt.Topic}
				for _, rp := range rt.Partitions {
					pr := fetchPartitionResult{partition: rp.Partition, highWatermark: 1, lastStableOffset: 1, preferredReadReplica: -1}
					if served[tp{rt.Topic, rp.Partition}] {
						pr.size = 100
					}
					res.partitions = append(res.partitions, pr)
				}
				topics = append(topics, res)
			}
			use.finish(topics, flags&0x80 != 0)
			check(step)
			epoch = nextSessionEpoch(epoch)
		}
	})
}
