package broker

// DescribeLogDirs (key 35), versions 0–5.
//
// Each log directory with the partitions this node stores in it and their size in
// bytes; from v4 the directory's total and usable bytes (statfs). A null topic list
// means every partition. There are no future (moving) replicas, so offset lag is 0 and
// IsFuture is false; directories cannot be cordoned (KIP-1066), so v5's IsCordoned is
// false. An offline directory (its disk failed) answers KAFKA_STORAGE_ERROR, without
// sizes or partitions, as Kafka's does.

import (
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

func init() { register(kmsg.DescribeLogDirs, 0, 5, (*Broker).handleDescribeLogDirs) }

func (b *Broker) handleDescribeLogDirs(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	resp.SetVersion(req.Version)

	var wanted map[replica.Key]bool
	if r.Topics != nil {
		wanted = make(map[replica.Key]bool)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				wanted[replica.Key{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	// log dir → topic → partitions
	byDir := make(map[string]map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition)
	for _, dir := range b.cfg.LogDirs {
		byDir[filepath.Clean(dir)] = make(map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition)
	}
	for _, p := range b.replicas.All() {
		if wanted != nil && !wanted[replica.Key{Topic: p.Topic, Partition: p.Index}] {
			continue
		}
		dir := filepath.Dir(p.Log.Dir())
		topics, ok := byDir[dir]
		if !ok {
			continue
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition = p.Index
		dp.Size = p.Log.Size()
		topics[p.Topic] = append(topics[p.Topic], dp)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d
		if b.logs.Offline(d) {
			rd.ErrorCode = kerr.KafkaStorageError.Code // as Kafka answers for an offline directory: no sizes, no partitions
			rd.TotalBytes, rd.UsableBytes = -1, -1
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err == nil {
			rd.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			rd.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		} else {
			rd.TotalBytes, rd.UsableBytes = -1, -1
		}
		names := make([]string, 0, len(byDir[d]))
		for t := range byDir[d] {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = t
			rt.Partitions = byDir[d][t]
			sort.Slice(rt.Partitions, func(i, j int) bool { return rt.Partitions[i].Partition < rt.Partitions[j].Partition })
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return reply(resp)
}
