package controller

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// placementBroker is a broker new replicas may go to.
type placementBroker struct {
	ID   int32
	Rack string // "" when broker.rack is not set; such brokers form one rack of their own
}

// placeableBrokers returns the active brokers of img (registered, unfenced, not in
// controlled shutdown), sorted by id.
func placeableBrokers(img *metadata.Image) []placementBroker {
	var out []placementBroker
	for _, b := range img.Brokers() {
		if b.Active() {
			out = append(out, placementBroker{ID: int32(b.NodeID), Rack: b.Rack})
		}
	}
	return out
}

// placeReplicas assigns replicationFactor distinct brokers to each of numPartitions
// partitions. It is a pure function: start rotates where the first leader goes, so
// that consecutive topics do not all start on the same broker.
//
// Brokers are first ordered rack by rack in turn (rack a's first broker, rack b's
// first, …, rack a's second, …), so that neighbours in that order sit in different
// racks. The leader of partition p is broker (start+p) mod n of that order: leaders
// are spread round-robin. Followers are taken from the brokers after the leader,
// beginning at an offset that grows by one every n partitions (so that followers
// spread too), preferring brokers whose rack the partition does not use yet; only
// when every rack holds a replica do racks repeat.
func placeReplicas(brokers []placementBroker, numPartitions, replicationFactor, start int) ([][]int32, error) {
	n := len(brokers)
	if replicationFactor > n {
		return nil, fmt.Errorf("%w: unable to replicate the partition %d time(s): only %d broker(s) are registered, unfenced and not shutting down",
			ErrInvalidReplicationFactor, replicationFactor, n)
	}
	if replicationFactor < 1 || numPartitions < 0 || start < 0 {
		return nil, fmt.Errorf("%w: replication factor %d, %d partitions", ErrInvalidRequest, replicationFactor, numPartitions)
	}
	order := rackAlternated(brokers)
	racks := map[string]bool{}
	for _, b := range brokers {
		racks[b.Rack] = true
	}
	out := make([][]int32, numPartitions)
	for p := range out {
		leaderIdx := (start + p) % n
		replicas := []int32{order[leaderIdx].ID}
		used := map[string]bool{order[leaderIdx].Rack: true}
		chosen := map[int32]bool{order[leaderIdx].ID: true}
		var followers []placementBroker
		if n > 1 {
			shift := (start + p) / n
			for k := range n - 1 {
				followers = append(followers, order[(leaderIdx+1+(shift+k)%(n-1))%n])
			}
		}
		for _, b := range followers { // new racks first
			if len(replicas) == replicationFactor || len(used) == len(racks) {
				break
			}
			if !used[b.Rack] {
				replicas = append(replicas, b.ID)
				used[b.Rack] = true
				chosen[b.ID] = true
			}
		}
		for _, b := range followers {
			if len(replicas) == replicationFactor {
				break
			}
			if !chosen[b.ID] {
				replicas = append(replicas, b.ID)
				chosen[b.ID] = true
			}
		}
		out[p] = replicas
	}
	return out, nil
}

// rackAlternated orders brokers taking one from each rack in turn (racks by name,
// brokers in a rack by id).
func rackAlternated(brokers []placementBroker) []placementBroker {
	byRack := map[string][]placementBroker{}
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	racks := make([]string, 0, len(byRack))
	for r, bs := range byRack {
		racks = append(racks, r)
		slices.SortFunc(bs, func(a, b placementBroker) int { return cmp.Compare(a.ID, b.ID) })
	}
	slices.Sort(racks)
	out := make([]placementBroker, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}
