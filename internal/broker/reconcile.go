package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// reconcile makes the local partitions match a metadata image: it opens (or creates) the
// log of every partition this node replicates, applies leadership and topic configs, and
// deletes the logs of partitions that no longer exist. It is idempotent.
func (b *Broker) reconcile(img *metadata.Image) {
	b.reconcileMu.Lock()
	defer b.reconcileMu.Unlock()

	type local struct {
		topic    *metadata.Topic
		part     metadata.Partition
		topicCfg config.Topic
		logCfg   storage.Config
	}
	var (
		wanted  = make(map[replica.Key]bool)
		locals  []local
		missing []local
	)
	// The coordinators map keys to the partitions their topics have, whatever the
	// *.num.partitions properties say now (Kafka's coordinators take the count from
	// the metadata cache).
	if t, ok := img.Topic(offsetsTopic); ok {
		b.groups.SetNumPartitions(int32(len(t.Partitions)))
	}
	if t, ok := img.Topic(transactionStateTopic); ok {
		b.txns.SetNumPartitions(int32(len(t.Partitions)))
	}
	// Topic defaults follow the dynamic broker configs (KIP-226): a change of them
	// reaches every partition without an override here.
	cfg := b.effectiveConfig(img)
	b.dynamic.notify(cfg)
	for _, t := range img.Topics() {
		topicCfg, err := config.ResolveTopic(cfg, t.Configs)
		if err != nil {
			b.logger.Error("topic config does not resolve; using broker defaults", "topic", t.Name, "err", err)
			topicCfg, _ = config.ResolveTopic(cfg, nil)
		}
		logCfg := storageConfig(topicCfg, cfg)
		for _, part := range t.Partitions {
			if !contains(part.Replicas, b.nodeID) {
				continue
			}
			key := replica.Key{Topic: t.Name, Partition: part.Partition}
			wanted[key] = true
			l := local{topic: t, part: part, topicCfg: topicCfg, logCfg: logCfg}
			p := b.replicas.Get(t.Name, part.Partition)
			if p != nil && p.TopicID != [16]byte(t.ID) {
				// Same name, new topic: the old one was deleted and re-created.
				b.dropPartition(key)
				p = nil
			}
			if p == nil {
				missing = append(missing, l)
			} else {
				p.Log.UpdateConfig(logCfg)
			}
			locals = append(locals, l)
		}
	}
	// New partitions (a topic with thousands of them, or start-up) are opened in
	// parallel: creating a log is a few file creations and fsyncs.
	var unopenedMu sync.Mutex
	unopened := map[replica.Key]bool{}
	parallel(len(missing), 16, func(i int) {
		l := missing[i]
		log, err := b.logs.GetOrCreate(l.topic.Name, l.part.Partition, [16]byte(l.topic.ID), l.logCfg)
		switch {
		case errors.Is(err, storage.ErrLogDirOffline):
			// Said once, when the directory failed; every reconcile comes here again.
			b.logger.Debug("partition log not opened", "topic", l.topic.Name, "partition", l.part.Partition, "err", err)
			unopenedMu.Lock()
			unopened[replica.Key{Topic: l.topic.Name, Partition: l.part.Partition}] = true
			unopenedMu.Unlock()
			return
		case err != nil:
			b.logger.Error("cannot open partition log", "topic", l.topic.Name, "partition", l.part.Partition, "err", err)
			b.openFailed(err)
			return
		}
		b.replicas.Put(replica.NewPartition(l.topic.Name, l.part.Partition, [16]byte(l.topic.ID), log, b.nodeID))
	})
	b.setUnopened(unopened)
	for _, l := range locals {
		p := b.replicas.Get(l.topic.Name, l.part.Partition)
		if p == nil {
			continue // failed to open, logged above
		}
		codec, recompress := record.ParseCompression(l.topicCfg.CompressionType) // "producer": kept as produced
		var bounds *replica.TimestampBounds
		if before, after := l.topicCfg.TimestampBounds(); before != math.MaxInt64 || after != math.MaxInt64 {
			bounds = &replica.TimestampBounds{Before: before, After: after}
		}
		p.SetSettings(replica.Settings{
			MaxMessageBytes:   int(l.topicCfg.MaxMessageBytes),
			MinInsyncReplicas: int(l.topicCfg.MinInsyncReplicas),
			Recompress:        recompress,
			Compression:       codec,
			CompressionLevel:  l.topicCfg.CompressionLevel(),
			RequireKeys:       l.topicCfg.Compact(),
			Timestamps:        bounds,
		})
		b.applyReplication(p, l.part)
		switch l.topic.Name {
		case offsetsTopic:
			b.updateGroupPartition(l.part.Partition, l.part.Leader == b.nodeID)
		case transactionStateTopic:
			b.updateTxnPartition(l.part.Partition, l.part.Leader == b.nodeID, l.part.LeaderEpoch)
		}
	}
	for _, p := range b.replicas.All() {
		key := replica.Key{Topic: p.Topic, Partition: p.Index}
		if !wanted[key] {
			b.dropPartition(key)
		}
	}
}

// storageFailed takes a partition's log directory offline when err is an I/O error:
// every partition in that directory then answers KAFKA_STORAGE_ERROR, and Metadata
// reports it without a leader, while the other directories keep serving. A full disk
// (storage.ErrNoSpace: the append was undone) answers KAFKA_STORAGE_ERROR too but
// leaves the directory online, so that it serves again once space is freed.
func (b *Broker) storageFailed(p *replica.Partition, err error) {
	if errorCode(err) != kerr.KafkaStorageError.Code || errors.Is(err, replica.ErrOffline) || errors.Is(err, storage.ErrNoSpace) {
		return
	}
	p.SetOffline()
	b.dirFailed(filepath.Dir(p.Log.Dir()), err)
}

// openFailed takes offline the log directory in which a partition's log could not be
// opened or created on an I/O error (at start-up: the disk failed while the node was
// down), as Kafka takes offline a directory whose logs fail to load; a full disk
// (ENOSPC) leaves it online, as for appends. Each error joined in err (errors.Join:
// the start-up load of many logs) counts on its own, so that failures in several
// directories take each of them offline.
func (b *Broker) openFailed(err error) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			b.openFailed(e)
		}
		return
	}
	path, ok := failedFile(err)
	if !ok || errors.Is(err, syscall.ENOSPC) {
		return
	}
	for _, dir := range b.cfg.LogDirs {
		if rel, rerr := filepath.Rel(dir, path); rerr == nil && filepath.IsLocal(rel) {
			b.dirFailed(dir, err)
			return
		}
	}
}

// failedFile returns the file of a failed file operation in err: the path of an
// *fs.PathError (open, write, remove, …), the old name of an *os.LinkError (rename).
func failedFile(err error) (string, bool) {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Path, true
	}
	var linkErr *os.LinkError
	if errors.As(err, &linkErr) {
		return linkErr.Old, true
	}
	return "", false
}

// dirFailed takes log directory dir offline after err: its partitions answer
// KAFKA_STORAGE_ERROR; when it was the last one online the node stops (fail).
func (b *Broker) dirFailed(dir string, err error) {
	for _, k := range b.logs.MarkOffline(dir, err) {
		if rp := b.replicas.Get(k.Topic, k.Partition); rp != nil {
			rp.SetOffline()
		}
	}
	if b.logs.AllOffline() {
		b.fail(fmt.Errorf("every log directory has failed (log.dirs=%s), the last %s: %w; repair or replace the disk and restart",
			strings.Join(b.cfg.LogDirs, ","), dir, err))
		return
	}
	b.pokeHeartbeat() // the controller hears of the offline replicas at once
}

// parallel runs fn(0..n-1) on at most workers goroutines and waits for all of them.
func parallel(n, workers int, fn func(i int)) {
	if n == 0 {
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(n, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// updateGroupPartition makes the group coordinator load (in the background) or unload a
// __consumer_offsets partition as this node gains or loses its leadership.
func (b *Broker) updateGroupPartition(p int32, leader bool) {
	switch has := b.groups.HasPartition(p); {
	case leader && !has:
		go func() {
			if err := b.groups.LoadPartition(context.Background(), p); err != nil {
				b.logger.Error("cannot load group partition", "partition", p, "err", err)
			}
		}()
	case !leader && has:
		b.groups.UnloadPartition(p)
	}
}

func (b *Broker) dropPartition(key replica.Key) {
	switch key.Topic {
	case offsetsTopic:
		b.groups.UnloadPartition(key.Partition)
	case transactionStateTopic:
		b.txns.UnloadPartition(key.Partition)
	}
	if p := b.replicas.Remove(key.Topic, key.Partition); p != nil {
		b.fetchers.Unfollow(p)
		if err := b.logs.Delete(key.Topic, key.Partition); err != nil {
			b.logger.Error("cannot delete partition log", "topic", key.Topic, "partition", key.Partition, "err", err)
		}
	}
}

// removeOrphanLogs deletes logs found on disk whose topic no longer exists (deleted
// while this node was down).
func (b *Broker) removeOrphanLogs(img *metadata.Image) {
	for _, k := range b.logs.Existing() {
		t, ok := img.Topic(k.Topic)
		if ok && int(k.Partition) < len(t.Partitions) && contains(t.Partitions[k.Partition].Replicas, b.nodeID) {
			continue
		}
		b.logger.Info("deleting log of a partition that no longer exists", "topic", k.Topic, "partition", k.Partition)
		if err := b.logs.Delete(k.Topic, k.Partition); err != nil {
			b.logger.Error("cannot delete orphan log", "topic", k.Topic, "partition", k.Partition, "err", err)
		}
	}
}

// logConfig returns the storage settings of a topic in an image (broker defaults for an
// unknown topic).
func (b *Broker) logConfig(img *metadata.Image, topic string) storage.Config {
	var overrides map[string]string
	if t, ok := img.Topic(topic); ok {
		overrides = t.Configs
	}
	cfg := b.effectiveConfig(img)
	tc, err := config.ResolveTopic(cfg, overrides)
	if err != nil {
		tc, _ = config.ResolveTopic(cfg, nil)
	}
	return storageConfig(tc, cfg)
}

// storageConfig turns resolved topic configs (and the broker's settings of every log)
// into the log's settings.
func storageConfig(t config.Topic, bc *config.Broker) storage.Config {
	flushMessages := t.FlushMessages
	if flushMessages <= 0 {
		flushMessages = math.MaxInt64
	}
	// In storage.Config zero means "Kafka's default"; explicit zeros become the smallest
	// positive value with the same effect.
	dirtyRatio := t.MinCleanableDirtyRatio
	if dirtyRatio <= 0 {
		dirtyRatio = 1e-9
	}
	indexInterval := int(t.IndexIntervalBytes)
	if indexInterval == 0 {
		indexInterval = 1 // every batch indexed, as Kafka does for 0: none is 1 byte
	}
	flushMs := t.FlushMs
	if flushMs == 0 {
		flushMs = 1 // flush at every pass of the flush scheduler, as Kafka does for 0
	}
	retentionMs, retentionBytes := t.RetentionMs, t.RetentionBytes
	if retentionMs == 0 {
		retentionMs = storage.RetainNothing // keep nothing, not the default
	}
	if retentionBytes == 0 {
		retentionBytes = storage.RetainNothing
	}
	return storage.Config{
		Compact:                containsString(t.CleanupPolicy, "compact"),
		DeleteRetentionMs:      max(t.DeleteRetentionMs, 1),
		MinCompactionLagMs:     t.MinCompactionLagMs,
		MaxCompactionLagMs:     t.MaxCompactionLagMs,
		MinCleanableDirtyRatio: dirtyRatio,
		SegmentBytes:           t.SegmentBytes,
		SegmentMs:              t.SegmentMs,
		SegmentJitterMs:        t.SegmentJitterMs,
		RetentionMs:            retentionMs,
		RetentionBytes:         retentionBytes,
		DeleteRetention:        containsString(t.CleanupPolicy, "delete"),
		IndexIntervalBytes:     indexInterval,
		SegmentIndexBytes:      int(t.SegmentIndexBytes),
		FlushIntervalMessages:  flushMessages,
		FlushIntervalMs:        flushMs,
		LogAppendTime:          t.LogAppendTime(),
		FileDeleteDelayMs:      t.FileDeleteDelayMs,
		Preallocate:            t.Preallocate,
		ProducerIDExpirationMs: int64(bc.ProducerIDExpirationMs),
	}
}

func contains(xs []int32, x int32) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func containsString(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
