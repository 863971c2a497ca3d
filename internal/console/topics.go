package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/cli"
)

// topicRow is one row of the Topics page.
type topicRow struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	UnderReplicated   int
	Offline           int
	Internal          bool
}

type topicsData struct {
	Query    string
	Internal bool
	Rows     []topicRow
	Pager    pager
}

func (s *Server) topics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	md, err := s.adm.Metadata(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, "Topics", err)
		return
	}
	q := r.URL.Query()
	d := topicsData{Query: strings.TrimSpace(q.Get("q")), Internal: q.Get("internal") == "1"}
	rows := topicRows(md.Topics, d.Query, d.Internal)
	d.Pager = paginate(r, len(rows), s.cfg.PageSize)
	from, to := d.Pager.bounds()
	d.Rows = rows[from:to]
	s.render(w, http.StatusOK, "topics", page{Title: "Topics", Nav: "topics", Data: d})
}

// topicRows lists the topics whose name contains query, sorted by name; it is pure.
func topicRows(topics kadm.TopicDetails, query string, internal bool) []topicRow {
	rows := make([]topicRow, 0, len(topics))
	for _, t := range topics {
		if (t.IsInternal && !internal) || !strings.Contains(t.Topic, query) {
			continue
		}
		row := topicRow{Name: t.Topic, Partitions: len(t.Partitions), ReplicationFactor: t.Partitions.NumReplicas(), Internal: t.IsInternal}
		for _, p := range t.Partitions {
			switch {
			case p.Leader < 0:
				row.Offline++
			case len(p.ISR) < len(p.Replicas):
				row.UnderReplicated++
			}
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}

// createTopic handles the Topics page's form: name, partitions, replication factor
// and configs (key=value, one a line); empty numbers take the broker's defaults.
func (s *Server) createTopic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	partitions, err1 := optionalNumber(r.PostFormValue("partitions"), "partitions")
	rf, err2 := optionalNumber(r.PostFormValue("replication_factor"), "replication factor")
	configs, err3 := parseLines(r.PostFormValue("configs"), "configs")
	if name == "" {
		err1 = errors.Join(err1, errors.New("name: a topic needs a name"))
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		s.fail(w, http.StatusBadRequest, "Create topic", err)
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	cfg := make(map[string]*string, len(configs))
	for _, kv := range configs {
		cfg[kv[0]] = &kv[1]
	}
	resp, err := s.adm.CreateTopic(ctx, int32(partitions), int16(rf), cfg, name)
	if err != nil {
		s.fail(w, kafkaStatus(err), "Create topic", fmt.Errorf("create topic %q: %w", name, cli.WithBrokerMessage(err, resp.ErrMessage)))
		return
	}
	s.cfg.Logger.Info("created topic", "topic", name, "partitions", resp.NumPartitions)
	redirect(w, r, topicURL(name))
}

// optionalNumber parses a form number; empty means -1 (the broker's default).
func optionalNumber(v, field string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<15-1 {
		return 0, fmt.Errorf("%s: %q is not a positive number", field, v)
	}
	return n, nil
}

// parseLines parses key=value lines; blank lines are skipped.
func parseLines(text, field string) ([][2]string, error) {
	var out [][2]string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not key=value", field, line)
		}
		out = append(out, [2]string{k, strings.TrimSpace(v)})
	}
	return out, nil
}

// kafkaStatus is the HTTP status for a broker's refusal.
func kafkaStatus(err error) int {
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return http.StatusConflict
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.GroupIDNotFound):
		return http.StatusNotFound
	case errors.Is(err, kerr.NonEmptyGroup):
		return http.StatusConflict
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// topicData is a topic's page.
type topicData struct {
	Name              string
	ID                string
	Internal          bool
	ReplicationFactor int
	Partitions        []partitionRow
	Pager             pager
	Overrides         []configRow // configs set on the topic
	Defaults          []configRow // every other config
	ConfigsError      string
	Produced          *producedAt // the record produced just before, from ?produced=
}

type partitionRow struct {
	ID          int32
	Leader      int32
	Replicas    []int32
	ISR         []int32
	Start, End  string // offsets, "-" when unknown
	Size        string
	UnderRepl   bool
	LeaderEpoch int32
}

type configRow struct {
	Name, Value, Source string
}

type producedAt struct {
	Partition int32
	Offset    int64
}

func (s *Server) topic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	ctx, cancel := s.requestContext(r)
	defer cancel()
	detail, err := s.topicDetail(ctx, name)
	if err != nil {
		s.fail(w, kafkaStatus(err), "Topic "+name, err)
		return
	}
	d := topicData{Name: name, Internal: detail.IsInternal, ReplicationFactor: detail.Partitions.NumReplicas()}
	if detail.ID != (kadm.TopicID{}) {
		d.ID = detail.ID.String()
	}
	parts := detail.Partitions.Sorted()
	d.Pager = paginate(r, len(parts), s.cfg.PageSize)
	from, to := d.Pager.bounds()
	parts = parts[from:to]
	d.Partitions = s.partitionRows(ctx, name, parts)
	d.Overrides, d.Defaults, err = s.topicConfigs(ctx, name)
	if err != nil {
		d.ConfigsError = classify(err).Error()
	}
	if p, o, ok := strings.Cut(r.URL.Query().Get("produced"), ":"); ok {
		pi, err1 := strconv.ParseInt(p, 10, 32)
		oi, err2 := strconv.ParseInt(o, 10, 64)
		if err1 == nil && err2 == nil {
			d.Produced = &producedAt{Partition: int32(pi), Offset: oi}
		}
	}
	s.render(w, http.StatusOK, "topic", page{Title: "Topic " + name, Nav: "topics", Data: d})
}

// topicDetail reads one topic's metadata; a topic that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) topicDetail(ctx context.Context, name string) (kadm.TopicDetail, error) {
	md, err := s.adm.Metadata(ctx, name)
	if err != nil {
		return kadm.TopicDetail{}, err
	}
	d, ok := md.Topics[name]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return kadm.TopicDetail{}, cli.WithBrokerMessage(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %q does not exist", name))
	}
	if d.Err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("topic %q: %w", name, d.Err)
	}
	return d, nil
}

// partitionRows reads start and end offsets and sizes of the shown partitions only.
func (s *Server) partitionRows(ctx context.Context, topic string, parts []kadm.PartitionDetail) []partitionRow {
	var sizes map[int32]int64
	var wg sync.WaitGroup
	wg.Go(func() { sizes = s.partitionSizes(ctx, topic, parts) })
	starts, ends, _ := s.startsAndEnds(ctx, topic, parts) // "-" where unknown
	wg.Wait()
	rows := make([]partitionRow, len(parts))
	for i, p := range parts {
		rows[i] = partitionRow{ID: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR,
			LeaderEpoch: p.LeaderEpoch, Start: offsetText(starts, p.Partition), End: offsetText(ends, p.Partition),
			UnderRepl: len(p.ISR) < len(p.Replicas), Size: "-"}
		if size, ok := sizes[p.Partition]; ok {
			rows[i].Size = cli.HumanBytes(size)
		}
	}
	return rows
}

func offsetText(m map[int32]int64, p int32) string {
	if o, ok := m[p]; ok {
		return strconv.FormatInt(o, 10)
	}
	return "-"
}

// startsAndEnds lists the partitions' log start and end offsets, both at once.
func (s *Server) startsAndEnds(ctx context.Context, topic string, parts []kadm.PartitionDetail) (starts, ends map[int32]int64, err error) {
	var errStarts error
	var wg sync.WaitGroup
	wg.Go(func() { starts, errStarts = s.listOffsets(ctx, topic, parts, -2) })
	ends, err = s.listOffsets(ctx, topic, parts, -1)
	wg.Wait()
	return starts, ends, cmp.Or(errStarts, err)
}

// listOffsets asks the partitions' leaders for the offset at timestamp ts (-2 the
// log start, -1 the log end, else the first at or after ts ms), one request per
// leader, all at once. The leaders are those of the metadata the page just read, so
// the answer never waits on the client's own, older view of a new topic. Partitions
// that did not answer are missing from the result; err is the first failure.
func (s *Server) listOffsets(ctx context.Context, topic string, parts []kadm.PartitionDetail, ts int64) (map[int32]int64, error) {
	byLeader := map[int32][]int32{}
	var first error
	for _, p := range parts {
		if p.Leader < 0 {
			first = cmp.Or(first, fmt.Errorf("partition %d: %w", p.Partition, kerr.LeaderNotAvailable))
			continue
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], p.Partition)
	}
	var (
		mu  sync.Mutex
		out = make(map[int32]int64, len(parts))
		wg  sync.WaitGroup
	)
	for leader, ids := range byLeader {
		wg.Go(func() {
			got, err := s.listOffsetsOn(ctx, leader, topic, ids, ts)
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(out, got)
			first = cmp.Or(first, err)
		})
	}
	wg.Wait()
	return out, first
}

// listOffsetsOn sends one ListOffsets request to a broker.
func (s *Server) listOffsetsOn(ctx context.Context, broker int32, topic string, partitions []int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.cl.Broker(int(broker)))
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(partitions))
	var first error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			switch {
			case p.ErrorCode != 0:
				first = cmp.Or(first, fmt.Errorf("partition %d: %w", p.Partition, kerr.ErrorForCode(p.ErrorCode)))
			case p.Offset >= 0:
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, first
}

// partitionSizes reads the partitions' sizes on disk (DescribeLogDirs): the leader's
// replica, else the largest; nil when the cluster does not say.
func (s *Server) partitionSizes(ctx context.Context, topic string, parts []kadm.PartitionDetail) map[int32]int64 {
	var set kadm.TopicsSet
	leaders := make(map[int32]int32, len(parts))
	for _, p := range parts {
		set.Add(topic, p.Partition)
		leaders[p.Partition] = p.Leader
	}
	dirs, err := s.adm.DescribeAllLogDirs(ctx, set)
	if err != nil && len(dirs) == 0 {
		return nil
	}
	sizes := map[int32]int64{}
	fromLeader := map[int32]bool{}
	dirs.Each(func(dir kadm.DescribedLogDir) {
		dir.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			switch {
			case dir.Err != nil || p.Topic != topic || p.IsFuture || fromLeader[p.Partition]:
			case p.Broker == leaders[p.Partition]:
				sizes[p.Partition], fromLeader[p.Partition] = p.Size, true
			case p.Size > sizes[p.Partition]:
				sizes[p.Partition] = p.Size
			}
		})
	})
	return sizes
}

// topicConfigs splits a topic's configs into those set on it and the rest.
func (s *Server) topicConfigs(ctx context.Context, name string) (overrides, defaults []configRow, err error) {
	rcs, err := s.adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, nil, err
	}
	for _, c := range rc.Configs {
		row := configRow{Name: c.Key, Value: c.MaybeValue(), Source: strings.ToLower(strings.TrimPrefix(c.Source.String(), "ConfigSource"))}
		if c.Sensitive {
			row.Value = "(sensitive)"
		}
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			overrides = append(overrides, row)
		} else {
			defaults = append(defaults, row)
		}
	}
	byName := func(a, b configRow) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(overrides, byName)
	slices.SortFunc(defaults, byName)
	return overrides, defaults, nil
}

// alterTopicConfigs sets (op=set, name, value) or removes (op=delete, name) one
// config override.
func (s *Server) alterTopicConfigs(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	name := strings.TrimSpace(r.PostFormValue("name"))
	value := r.PostFormValue("value")
	var op kadm.AlterConfig
	switch r.PostFormValue("op") {
	case "set":
		op = kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
	case "delete":
		op = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name}
	default:
		s.fail(w, http.StatusBadRequest, "Edit configs", errors.New("op must be set or delete"))
		return
	}
	if name == "" {
		s.fail(w, http.StatusBadRequest, "Edit configs", errors.New("name: which config?"))
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	resps, err := s.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{op}, topic)
	if err == nil {
		for _, rr := range resps {
			if rr.Err != nil {
				err = cli.WithBrokerMessage(rr.Err, rr.ErrMessage)
			}
		}
	}
	if err != nil {
		s.fail(w, kafkaStatus(err), "Edit configs", fmt.Errorf("alter configs of topic %q: %w", topic, err))
		return
	}
	s.cfg.Logger.Info("altered topic config", "topic", topic, "config", name, "op", r.PostFormValue("op"))
	redirect(w, r, topicURL(topic)+"#configs")
}

func (s *Server) confirmDeleteTopic(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	s.render(w, http.StatusOK, "delete", page{Title: "Delete topic " + topic, Nav: "topics", Data: topic})
}

// deleteTopic deletes the topic named in the path; the confirmation page's form
// repeats the name in "confirm", so a stray POST does not delete anything.
func (s *Server) deleteTopic(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if r.PostFormValue("confirm") != topic {
		s.fail(w, http.StatusBadRequest, "Delete topic", errors.New("not confirmed: delete a topic from its confirmation page"))
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	resp, err := s.adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		s.fail(w, kafkaStatus(err), "Delete topic", fmt.Errorf("delete topic %q: %w", topic, err))
		return
	}
	s.cfg.Logger.Info("deleted topic", "topic", topic)
	s.render(w, http.StatusOK, "message", page{Title: "Topic deleted", Nav: "topics",
		Data: messageData{Message: fmt.Sprintf("Deleted topic %q and all its records.", topic), Next: "/topics", NextText: "Topics"}})
}
