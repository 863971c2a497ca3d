package console

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The message browser reads with plain Fetch requests to the partitions' leaders: no
// consumer group is joined and nothing is committed. Every read is bounded: at most
// maxReadRecords records per page, at most the page's limit per partition, and
// fetchPartitionBytes per partition and round (a single record larger than that is
// still returned whole, as Kafka does, and shown truncated).
const (
	maxReadRecords      = 1000
	fetchPartitionBytes = 1 << 20
	fetchMaxBytes       = 16 << 20
	fetchRounds         = 4
	fullValueBytes      = 1 << 20 // what a single record's page shows of a value
)

// Browse modes (?from=).
const (
	fromNewest = "newest"
	fromOffset = "offset"
	fromTime   = "time"
)

// browseQuery is what the Messages page was asked for.
type browseQuery struct {
	Partition int32 // -1: every partition
	From      string
	Offset    int64
	Time      string // as typed, RFC3339 or a datetime-local value (UTC)
	Limit     int
	Key       string // substring the key must contain
}

// parseBrowseQuery reads the Messages page's query string; it is pure.
func parseBrowseQuery(q map[string][]string, defLimit, maxLimit int) (browseQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	b := browseQuery{Partition: -1, From: fromNewest, Limit: defLimit, Key: get("key"), Time: get("time")}
	var errs []error
	if v := get("partition"); v != "" && v != "all" {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 0 {
			errs = append(errs, fmt.Errorf("partition: %q is not a partition number", v))
		}
		b.Partition = int32(p)
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("limit: %q is not a positive number", v))
		}
		b.Limit = min(n, maxLimit)
	}
	switch from := get("from"); from {
	case "", fromNewest:
	case fromOffset:
		b.From = fromOffset
		n, err := strconv.ParseInt(get("offset"), 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("offset: %q is not an offset", get("offset")))
		}
		b.Offset = n
	case fromTime:
		b.From = fromTime
		if _, err := parseTime(b.Time); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("from: %q is not newest, offset or time", from))
	}
	return b, errors.Join(errs...)
}

// parseTime accepts RFC3339, or a datetime-local value (2006-01-02T15:04[:05]) as UTC.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time: %q is not a time (2024-05-01T12:00:00Z)", s)
}

// readPlan is where to read one partition: from Start, at most Count records, never
// at or past Stop (the log end when the page was asked for).
type readPlan struct {
	Partition int32
	Leader    int32
	Start     int64
	Stop      int64
	Count     int
}

// planReads decides what to read of each partition; it is pure. starts and ends are
// the partitions' log start and end offsets, at the offsets of ?from=time (nil
// otherwise). Newest reads the last records of the busiest partitions.
func planReads(b browseQuery, parts []kadm.PartitionDetail, starts, ends, at map[int32]int64) []readPlan {
	var plans []readPlan
	for _, p := range parts {
		start, okS := starts[p.Partition]
		end, okE := ends[p.Partition]
		if !okS || !okE || end <= start || p.Leader < 0 {
			continue
		}
		plan := readPlan{Partition: p.Partition, Leader: p.Leader, Stop: end}
		switch b.From {
		case fromNewest:
			plan.Start = start // narrowed below, once the count is known
		case fromOffset:
			plan.Start = max(b.Offset, start)
		case fromTime:
			o, ok := at[p.Partition]
			if !ok {
				continue
			}
			plan.Start = max(o, start)
		}
		if plan.Start < end {
			plans = append(plans, plan)
		}
	}
	if b.From == fromNewest {
		// The busiest partitions first, so a budget smaller than the partition count
		// reads those most likely to hold the newest records.
		slices.SortStableFunc(plans, func(x, y readPlan) int { return cmp.Compare(y.Stop-y.Start, x.Stop-x.Start) })
	}
	budget := maxReadRecords
	if len(plans) > budget {
		plans = plans[:budget]
	}
	per := b.Limit
	if len(plans) > 0 {
		per = min(b.Limit, max(1, budget/len(plans)))
	}
	for i := range plans {
		plans[i].Count = per
		if b.From == fromNewest {
			plans[i].Start = max(plans[i].Start, plans[i].Stop-int64(per))
		}
	}
	slices.SortFunc(plans, func(x, y readPlan) int { return cmp.Compare(x.Partition, y.Partition) })
	return plans
}

// fetchPlans reads the planned records with Fetch requests, one per leader per
// round. Partitions that fail are reported in notes; what was read is returned.
func (s *Server) fetchPlans(ctx context.Context, topic string, topicID [16]byte, plans []readPlan) ([]*kgo.Record, []string) {
	var (
		out   []*kgo.Record
		notes []string
	)
	pending := slices.Clone(plans)
	for round := 0; round < fetchRounds && len(pending) > 0; round++ {
		byLeader := map[int32][]*readPlan{}
		for i := range pending {
			byLeader[pending[i].Leader] = append(byLeader[pending[i].Leader], &pending[i])
		}
		var next []readPlan
		for leader, ps := range byLeader {
			resp, err := s.fetchOnce(ctx, leader, topic, topicID, ps)
			if err != nil {
				notes = append(notes, fmt.Sprintf("partitions %s: %v", partitionList(ps), classify(err)))
				continue
			}
			for _, rt := range resp.Topics {
				for i := range rt.Partitions {
					rp := &rt.Partitions[i]
					plan := findPlan(ps, rp.Partition)
					if plan == nil {
						continue
					}
					recs, err := decodePartition(topic, plan, rp)
					if err != nil {
						notes = append(notes, fmt.Sprintf("partition %d: %v", plan.Partition, err))
						continue
					}
					out = append(out, recs...)
					plan.Count -= len(recs)
					if len(recs) > 0 {
						plan.Start = recs[len(recs)-1].Offset + 1
					}
					if len(recs) > 0 && plan.Count > 0 && plan.Start < plan.Stop {
						next = append(next, *plan)
					}
				}
			}
		}
		pending = next
	}
	return out, notes
}

func findPlan(ps []*readPlan, partition int32) *readPlan {
	for _, p := range ps {
		if p.Partition == partition {
			return p
		}
	}
	return nil
}

func partitionList(ps []*readPlan) string {
	ids := make([]int32, len(ps))
	for i, p := range ps {
		ids[i] = p.Partition
	}
	return joinInt32s(ids)
}

// fetchOnce sends one Fetch to a leader for its planned partitions; it does not wait
// for data (MaxWaitMillis 0).
func (s *Server) fetchOnce(ctx context.Context, leader int32, topic string, topicID [16]byte, ps []*readPlan) (*kmsg.FetchResponse, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = fetchMaxBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for _, p := range ps {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.Partition, p.Start, fetchPartitionBytes
		rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kresp, err := s.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch from broker %d: %w", leader, err)
	}
	return resp, nil
}

// decodePartition decodes a partition's fetched batches and keeps the planned
// records: from plan.Start, before plan.Stop, at most plan.Count.
func decodePartition(topic string, plan *readPlan, rp *kmsg.FetchResponseTopicPartition) ([]*kgo.Record, error) {
	if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
		return nil, nil // no record there: deleted by retention, or not written yet
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: plan.Partition, Offset: plan.Start},
		rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil && len(fp.Records) == 0 {
		return nil, fp.Err
	}
	var out []*kgo.Record
	for _, r := range fp.Records {
		if r.Offset < plan.Start || r.Offset >= plan.Stop || len(out) == plan.Count {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// recordRow is one record as the Messages page shows it.
type recordRow struct {
	Partition int32
	Offset    int64
	Timestamp string
	Key       shownBytes
	Value     shownBytes
	Headers   []headerRow
	URL       string // the record's own page
}

type headerRow struct {
	Key   string
	Value shownBytes
}

func newRecordRow(topic string, r *kgo.Record, preview int) recordRow {
	row := recordRow{Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format("2006-01-02 15:04:05.000"),
		Key:       showBytes(r.Key, r.Key == nil, preview), Value: showBytes(r.Value, r.Value == nil, preview),
		URL: fmt.Sprintf("%s/messages/%d/%d", topicURL(topic), r.Partition, r.Offset)}
	for _, h := range r.Headers {
		row.Headers = append(row.Headers, headerRow{Key: h.Key, Value: showBytes(h.Value, false, preview)})
	}
	return row
}

// messagesData is the Messages page.
type messagesData struct {
	Topic      string
	Query      browseQuery
	Partitions int
	Rows       []recordRow
	Read       int // records read, before the key filter
	Notes      []string
	Error      string
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	ctx, cancel := s.requestContext(r)
	defer cancel()
	detail, err := s.topicDetail(ctx, topic)
	if err != nil {
		s.fail(w, kafkaStatus(err), "Messages", err)
		return
	}
	d := messagesData{Topic: topic, Partitions: len(detail.Partitions)}
	q, err := parseBrowseQuery(r.URL.Query(), s.cfg.MessageLimit, s.cfg.MaxMessageLimit)
	d.Query = q
	if err != nil {
		d.Error = err.Error()
		s.render(w, http.StatusBadRequest, "messages", page{Title: "Messages in " + topic, Nav: "topics", Data: d})
		return
	}
	parts := detail.Partitions.Sorted()
	if q.Partition >= 0 {
		p, ok := detail.Partitions[q.Partition]
		if !ok {
			d.Error = fmt.Sprintf("partition: topic %q has no partition %d (it has %d)", topic, q.Partition, len(parts))
			s.render(w, http.StatusNotFound, "messages", page{Title: "Messages in " + topic, Nav: "topics", Data: d})
			return
		}
		parts = []kadm.PartitionDetail{p}
	}
	recs, notes, err := s.browse(ctx, topic, detail, parts, q)
	if err != nil {
		s.fail(w, http.StatusBadGateway, "Messages", err)
		return
	}
	d.Read, d.Notes = len(recs), notes
	// One partition reads in offset order; several are merged by timestamp. Newest
	// shows the last records first.
	newestFirst := q.From == fromNewest
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		c := cmp.Compare(a.Offset, b.Offset)
		if q.Partition < 0 {
			c = cmp.Or(a.Timestamp.Compare(b.Timestamp), cmp.Compare(a.Partition, b.Partition), c)
		}
		if newestFirst {
			return -c
		}
		return c
	})
	for _, rec := range recs {
		if q.Key != "" && !bytes.Contains(rec.Key, []byte(q.Key)) {
			continue
		}
		if len(d.Rows) == q.Limit {
			break
		}
		d.Rows = append(d.Rows, newRecordRow(topic, rec, s.cfg.ValuePreview))
	}
	s.render(w, http.StatusOK, "messages", page{Title: "Messages in " + topic, Nav: "topics", Data: d})
}

// browse plans and reads the records a Messages query asks for.
func (s *Server) browse(ctx context.Context, topic string, detail kadm.TopicDetail, parts []kadm.PartitionDetail, q browseQuery) ([]*kgo.Record, []string, error) {
	starts, ends, err := s.startsAndEnds(ctx, topic, parts)
	var notes []string
	if err != nil {
		if err := classify(err); len(ends) == 0 && isUnreachable(err) {
			return nil, nil, err
		}
		notes = append(notes, fmt.Sprintf("the offsets of %d of %d partitions: %v", len(parts)-min(len(starts), len(ends)), len(parts), classify(err)))
	}
	var at map[int32]int64
	if q.From == fromTime {
		t, _ := parseTime(q.Time)
		at, _ = s.listOffsets(ctx, topic, parts, t.UnixMilli()) // a partition without a record that recent has none
	}
	plans := planReads(q, parts, starts, ends, at)
	recs, fetchNotes := s.fetchPlans(ctx, topic, detail.ID, plans)
	return recs, append(notes, fetchNotes...), nil
}

// singleRecord is the page of one record, with up to fullValueBytes of each field.
type singleRecord struct {
	Topic string
	Row   *recordRow
	Error string
}

func (s *Server) message(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	partition, err1 := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	offset, err2 := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if err1 != nil || err2 != nil || partition < 0 || offset < 0 {
		s.notFound(w, r)
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	detail, err := s.topicDetail(ctx, topic)
	if err != nil {
		s.fail(w, kafkaStatus(err), "Record", err)
		return
	}
	title := fmt.Sprintf("Record %d/%d in %s", partition, offset, topic)
	d := singleRecord{Topic: topic}
	p, ok := detail.Partitions[int32(partition)]
	if !ok {
		d.Error = fmt.Sprintf("topic %q has no partition %d", topic, partition)
		s.render(w, http.StatusNotFound, "record", page{Title: title, Nav: "topics", Data: d})
		return
	}
	plan := readPlan{Partition: p.Partition, Leader: p.Leader, Start: offset, Stop: offset + 1, Count: 1}
	recs, notes := s.fetchPlans(ctx, topic, detail.ID, []readPlan{plan})
	status := http.StatusOK
	switch {
	case len(recs) == 1 && recs[0].Offset == offset:
		row := newRecordRow(topic, recs[0], fullValueBytes)
		d.Row = &row
	case len(notes) > 0:
		d.Error, status = strings.Join(notes, "; "), http.StatusBadGateway
	default:
		d.Error, status = fmt.Sprintf("partition %d has no record at offset %d (deleted, compacted away or not written yet)", partition, offset), http.StatusNotFound
	}
	s.render(w, status, "record", page{Title: title, Nav: "topics", Data: d})
}

// produce produces one record from the topic page's form: key (empty: no key),
// value and headers (key=value lines).
func (s *Server) produce(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	headers, err := parseLines(r.PostFormValue("headers"), "headers")
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Produce", err)
		return
	}
	rec := &kgo.Record{Topic: topic, Value: []byte(r.PostFormValue("value"))}
	if k := r.PostFormValue("key"); k != "" {
		rec.Key = []byte(k)
	}
	for _, h := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if _, err := s.topicDetail(ctx, topic); err != nil {
		s.fail(w, kafkaStatus(err), "Produce", err)
		return
	}
	if err := s.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		s.fail(w, kafkaStatus(err), "Produce", fmt.Errorf("produce to %q: %w", topic, err))
		return
	}
	redirect(w, r, fmt.Sprintf("%s?produced=%d:%d", topicURL(topic), rec.Partition, rec.Offset))
}
