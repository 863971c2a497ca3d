package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/cli"
)

// groupRow is one row of the Consumer groups page.
type groupRow struct {
	Name        string
	Type        string // classic or consumer (KIP-848), as ListGroups says
	State       string
	Protocol    string
	Members     string // "-" when it could not be described
	Lag         string // the last sample's total lag, "-" before the first
	Coordinator int32
}

type groupsData struct {
	Rows  []groupRow
	Pager pager
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	listed, err := s.adm.ListGroups(ctx)
	if err := answerErr(listed, err); err != nil {
		s.fail(w, http.StatusBadGateway, "Consumer groups", err)
		return
	}
	all := listed.Sorted()
	d := groupsData{Pager: paginate(r, len(all), s.cfg.PageSize)}
	from, to := d.Pager.bounds()
	shown := all[from:to]
	members := s.memberCounts(ctx, shown)
	lags := s.lag.latest()
	for _, l := range shown {
		row := groupRow{Name: l.Group, Type: groupType(l), State: l.State, Protocol: l.ProtocolType,
			Coordinator: l.Coordinator, Members: "-", Lag: "-"}
		if n, ok := members[l.Group]; ok {
			row.Members = fmt.Sprint(n)
		}
		if lag, ok := lags[l.Group]; ok {
			row.Lag = fmt.Sprint(lag)
		}
		d.Rows = append(d.Rows, row)
	}
	s.render(w, http.StatusOK, "groups", page{Title: "Consumer groups", Nav: "groups", Data: d})
}

// groupType is the group's type as ListGroups gives it; brokers older than KIP-848
// do not say, and have classic groups only.
func groupType(l kadm.ListedGroup) string {
	if l.GroupType != "" {
		return l.GroupType
	}
	return "classic"
}

// memberCounts describes the shown groups, each with the API of its type.
func (s *Server) memberCounts(ctx context.Context, groups []kadm.ListedGroup) map[string]int {
	var classic, consumer []string
	for _, l := range groups {
		if groupType(l) == "consumer" {
			consumer = append(consumer, l.Group)
		} else {
			classic = append(classic, l.Group)
		}
	}
	out := map[string]int{}
	if len(classic) > 0 {
		described, _ := s.adm.DescribeGroups(ctx, classic...)
		for name, d := range described {
			if d.Err == nil {
				out[name] = len(d.Members)
			}
		}
	}
	if len(consumer) > 0 {
		described, _ := s.adm.DescribeConsumerGroups(ctx, consumer...)
		for name, d := range described {
			if d.Err == nil {
				out[name] = len(d.Members)
			}
		}
	}
	return out
}

// groupData is a group's page.
type groupData struct {
	Name     string
	Type     string
	State    string
	Protocol string
	Members  []memberRow
	Lag      lagSection
	Topics   []string // every topic the group is assigned or committed to
	CanReset bool     // the group has no active members
	WasReset bool     // the page follows a committed reset
}

// lagSection is the part of a group's page app.js refreshes: the lag table, its total
// and the chart.
type lagSection struct {
	Group      string
	Rows       []lagRow
	Pager      pager
	Total      int64
	Chart      lagChart
	Interval   string
	IntervalMs int64
}

type memberRow struct {
	ID, ClientID, Host string
	Assigned           string // topic: partitions; …
}

type lagRow struct {
	Topic     string
	Partition int32
	Committed string
	End       string
	Lag       string
	Member    string
}

// groupState is what a group's page reads: the description in the form of either
// group type, and the committed offsets.
type groupState struct {
	typ      string
	state    string
	protocol string
	members  []memberRow
	assigned map[string]map[int32]string // topic → partition → owner client id
	commits  kadm.OffsetResponses
}

func (s *Server) group(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	ctx, cancel := s.requestContext(r)
	defer cancel()
	st, err := s.loadGroup(ctx, name)
	if err != nil {
		s.fail(w, kafkaStatus(err), "Group "+name, err)
		return
	}
	lag, err := s.lagSection(ctx, r, name, st)
	if err != nil {
		s.fail(w, http.StatusBadGateway, "Group "+name, err)
		return
	}
	d := groupData{Name: name, Type: st.typ, State: st.state, Protocol: st.protocol, Members: st.members, Lag: lag,
		Topics: groupTopics(st), CanReset: len(st.members) == 0, WasReset: r.URL.Query().Get("reset") == "1"}
	s.render(w, http.StatusOK, "group", page{Title: "Group " + name, Nav: "groups", Data: d})
}

// groupLag renders the lag section alone, for app.js to swap in.
func (s *Server) groupLag(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	ctx, cancel := s.requestContext(r)
	defer cancel()
	st, err := s.loadGroup(ctx, name)
	if err != nil {
		http.Error(w, classify(err).Error(), kafkaStatus(err))
		return
	}
	lag, err := s.lagSection(ctx, r, name, st)
	if err != nil {
		http.Error(w, classify(err).Error(), http.StatusBadGateway)
		return
	}
	s.renderFragment(w, "group", "lag", lag)
}

// loadGroup describes a group with the API of its type and reads its commits; a
// group that does not exist is GROUP_ID_NOT_FOUND.
func (s *Server) loadGroup(ctx context.Context, name string) (groupState, error) {
	st := groupState{typ: "classic", assigned: map[string]map[int32]string{}}
	listed, err := s.adm.ListGroups(ctx)
	if err := answerErr(listed, err); err != nil {
		return st, err
	}
	if l, ok := listed[name]; ok {
		st.typ = groupType(l)
	}
	if st.typ == "consumer" {
		err = s.describeConsumerGroup(ctx, name, &st)
	}
	if st.typ != "consumer" || (err != nil && !errors.Is(err, kerr.GroupIDNotFound)) {
		// A cluster that lists consumer groups but does not describe them
		// (ConsumerGroupDescribe) still answers DescribeGroups.
		err = s.describeClassicGroup(ctx, name, &st)
	}
	if err != nil {
		return st, err
	}
	st.commits, err = s.adm.FetchOffsets(ctx, name)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return st, fmt.Errorf("fetch committed offsets of group %q: %w", name, err)
	}
	if _, ok := listed[name]; !ok && len(st.members) == 0 && len(st.commits) == 0 {
		return st, groupNotFound(name)
	}
	return st, nil
}

func (s *Server) describeClassicGroup(ctx context.Context, name string, st *groupState) error {
	described, err := s.adm.DescribeGroups(ctx, name)
	if err := answerErr(described, err); err != nil {
		return err
	}
	d, ok := described[name]
	switch {
	case !ok || errors.Is(d.Err, kerr.GroupIDNotFound):
		return groupNotFound(name)
	case d.Err != nil:
		return fmt.Errorf("describe group %q: %w", name, d.Err)
	}
	st.state, st.protocol = d.State, d.ProtocolType
	if d.Protocol != "" {
		st.protocol += "/" + d.Protocol
	}
	for _, m := range d.Members {
		row := memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if a, ok := m.Assigned.AsConsumer(); ok {
			assigned := map[string][]int32{}
			for _, t := range a.Topics {
				assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
			}
			row.Assigned = st.own(assigned, m.ClientID)
		}
		st.members = append(st.members, row)
	}
	return nil
}

func (s *Server) describeConsumerGroup(ctx context.Context, name string, st *groupState) error {
	described, err := s.adm.DescribeConsumerGroups(ctx, name)
	if err := answerErr(described, err); err != nil {
		return err
	}
	d, ok := described[name]
	switch {
	case !ok || errors.Is(d.Err, kerr.GroupIDNotFound):
		return groupNotFound(name)
	case d.Err != nil:
		return fmt.Errorf("describe group %q: %w", name, d.Err)
	}
	st.state, st.protocol = d.State, "consumer/"+d.AssignorName
	for _, m := range d.Members {
		row := memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		assigned := map[string][]int32{}
		m.Assignment.EachPartitions(func(t string, ps []int32) { assigned[t] = append(assigned[t], ps...) })
		row.Assigned = st.own(assigned, m.ClientID)
		st.members = append(st.members, row)
	}
	return nil
}

// own records a member's assignment and returns it as text.
func (st *groupState) own(assigned map[string][]int32, clientID string) string {
	var parts []string
	for _, t := range keys(assigned) {
		ps := slices.Sorted(slices.Values(assigned[t]))
		parts = append(parts, t+": "+joinInt32s(ps))
		if st.assigned[t] == nil {
			st.assigned[t] = map[int32]string{}
		}
		for _, p := range ps {
			st.assigned[t][p] = clientID
		}
	}
	return strings.Join(parts, "; ")
}

func groupTopics(st groupState) []string {
	set := map[string]bool{}
	for t := range st.commits {
		set[t] = true
	}
	for t := range st.assigned {
		set[t] = true
	}
	return keys(set)
}

// lagSection joins commits, assignments and end offsets into the lag table.
func (s *Server) lagSection(ctx context.Context, r *http.Request, name string, st groupState) (lagSection, error) {
	sec := lagSection{Group: name, Chart: buildLagChart(s.lag.history(name)), Interval: s.cfg.LagInterval.String(),
		IntervalMs: s.cfg.LagInterval.Milliseconds()}
	topics := groupTopics(st)
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		var err error
		ends, err = s.adm.ListEndOffsets(ctx, topics...)
		if err := answerErr(ends, err); err != nil {
			return sec, err
		}
	}
	type tp struct {
		topic     string
		partition int32
	}
	seen := map[tp]bool{}
	for t, ps := range st.commits {
		for p := range ps {
			seen[tp{t, p}] = true
		}
	}
	for t, ps := range st.assigned {
		for p := range ps {
			seen[tp{t, p}] = true
		}
	}
	all := keysOf(seen)
	slices.SortFunc(all, func(a, b tp) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition)) })
	sec.Pager = paginate(r, len(all), s.cfg.PageSize)
	from, to := sec.Pager.bounds()
	for i, k := range all {
		row := lagRow{Topic: k.topic, Partition: k.partition, Committed: "-", End: "-", Lag: "-", Member: st.assigned[k.topic][k.partition]}
		end, okEnd := ends.Lookup(k.topic, k.partition)
		okEnd = okEnd && end.Err == nil
		if okEnd {
			row.End = fmt.Sprint(end.Offset)
		}
		if c, ok := st.commits.Lookup(k.topic, k.partition); ok && c.Err == nil && c.At >= 0 {
			row.Committed = fmt.Sprint(c.At)
			if okEnd {
				lag := max(0, end.Offset-c.At)
				sec.Total += lag
				row.Lag = fmt.Sprint(lag)
			}
		}
		if i >= from && i < to {
			sec.Rows = append(sec.Rows, row)
		}
	}
	return sec, nil
}

func keysOf[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// resetData is the confirmation page of a reset: the plan, and the form that commits it.
type resetData struct {
	Group  string
	Topics []string
	To     string // the cli spec: earliest, latest or timestamp:T
	Label  string
	Rows   []cli.ResetRow
	Error  string
}

// resetSpec turns the group page's form (to=earliest|latest|timestamp, time) into
// reset-offsets' --to value.
func resetSpec(to, at string) (spec, label string, err error) {
	switch to {
	case "earliest", "latest":
		return to, "the " + to + " offset", nil
	case "timestamp":
		t, err := parseTime(strings.TrimSpace(at))
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("timestamp:%d", t.UnixMilli()), "the first record at or after " + t.UTC().Format(time.RFC3339), nil
	}
	return "", "", fmt.Errorf("to: %q is not earliest, latest or timestamp", to)
}

// reviewReset shows what a reset would commit, with the button that commits it.
func (s *Server) reviewReset(w http.ResponseWriter, r *http.Request) {
	s.reset(w, r, false)
}

// resetOffsets commits the reviewed reset.
func (s *Server) resetOffsets(w http.ResponseWriter, r *http.Request) {
	s.reset(w, r, true)
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request, execute bool) {
	name := r.PathValue("group")
	_ = r.ParseForm()
	d := resetData{Group: name}
	var err error
	status := http.StatusBadRequest // what was asked is wrong, until it is checked against the group
	if execute {
		d.To = r.PostForm.Get("spec") // exactly what was reviewed
	} else {
		d.To, d.Label, err = resetSpec(r.Form.Get("to"), r.Form.Get("time"))
	}
	if err == nil && d.To == "" {
		err = errors.New("spec: nothing to reset to")
	}
	spec := d.To
	ctx, cancel := s.requestContext(r)
	defer cancel()
	d.Topics = r.Form["topic"]
	if len(d.Topics) == 0 || slices.Contains(d.Topics, "") {
		st, lerr := s.loadGroup(ctx, name)
		if lerr != nil {
			s.fail(w, kafkaStatus(lerr), "Reset offsets", lerr)
			return
		}
		d.Topics = groupTopics(st)
	}
	if err == nil {
		status = http.StatusConflict // the group's state refuses it: active members, nothing committed
		if len(d.Topics) == 0 {
			err = errors.New("the group has no topics to reset: it has committed nothing and is assigned nothing")
		} else {
			d.Rows, err = cli.ResetOffsets(ctx, s.adm, s.cfg.Brokers, s.cfg.Timeout, name, d.Topics, spec, execute)
		}
	}
	if err != nil {
		if isUnreachable(classify(err)) {
			s.fail(w, http.StatusBadGateway, "Reset offsets", err)
			return
		}
		d.Error = err.Error()
		s.render(w, status, "reset", page{Title: "Reset offsets of " + name, Nav: "groups", Data: d})
		return
	}
	if execute {
		s.cfg.Logger.Info("reset group offsets", "group", name, "to", spec, "partitions", len(d.Rows))
		redirect(w, r, groupURL(name)+"?reset=1")
		return
	}
	s.render(w, http.StatusOK, "reset", page{Title: "Reset offsets of " + name, Nav: "groups", Data: d})
}

// groupNotFound is the error of a page for a group the cluster does not know.
func groupNotFound(name string) error {
	return cli.WithBrokerMessage(kerr.GroupIDNotFound, fmt.Sprintf("group %q does not exist", name))
}
