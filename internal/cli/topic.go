package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTopicCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("topic", "Create, list, describe, alter and delete topics",
		"Manage topics on Samsa or any Kafka-compatible cluster.")
	cmd.AddCommand(
		newTopicCreateCmd(g),
		newTopicListCmd(g),
		newTopicDescribeCmd(g),
		newTopicDeleteCmd(g),
		newTopicAlterConfigCmd(g),
		newTopicAddPartitionsCmd(g),
	)
	return cmd
}

// topicCreated is the JSON result of `topic create`.
type topicCreated struct {
	Topic             string `json:"topic"`
	ID                string `json:"id,omitempty"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
}

func newTopicCreateCmd(g *globals) *cobra.Command {
	var (
		partitions int32
		replicas   int16
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Long: `Create a topic with the given number of partitions and replication factor.
Without -p or -r the broker's num.partitions and default.replication.factor apply.`,
		Example: `  samsa topic create orders -p 6 -r 3
  samsa topic create audit -p 1 -r 3 -c retention.ms=604800000 -c cleanup.policy=compact`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			cfg, err := parseConfigPairs(configs, "-c")
			if err != nil {
				return err
			}
			if partitions == 0 || partitions < -1 {
				return usagef("-p must be positive (or -1 for the broker's default), not %d", partitions)
			}
			if replicas == 0 || replicas < -1 {
				return usagef("-r must be positive (or -1 for the broker's default), not %d", replicas)
			}
			return runTopicCreate(cmd, g, a[0], partitions, replicas, cfg)
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: broker default)")
	cmd.Flags().Int16VarP(&replicas, "replication-factor", "r", -1, "replicas per partition (-1: broker default)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable)")
	return cmd
}

func runTopicCreate(cmd *cobra.Command, g *globals, name string, p int32, rf int16, cfg map[string]*string) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	resp, err := adm.CreateTopic(ctx, p, rf, cfg, name)
	if err != nil {
		return g.explain(fmt.Sprintf("create topic %q", name), withBrokerMessage(err, resp.ErrMessage))
	}
	res := topicCreated{Topic: name, Partitions: resp.NumPartitions, ReplicationFactor: resp.ReplicationFactor}
	if resp.ID != (kadm.TopicID{}) {
		res.ID = resp.ID.String()
	}
	if res.Partitions <= 0 {
		res.Partitions = p
	}
	if res.ReplicationFactor <= 0 {
		res.ReplicationFactor = rf
	}
	return g.newOutput(cmd).render(res, func(w io.Writer) {
		fmt.Fprintf(w, "created topic %q (partitions: %d, replication factor: %d)\n",
			name, res.Partitions, res.ReplicationFactor)
	})
}

// topicSummary is one row of `topic list`.
type topicSummary struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func newTopicListCmd(g *globals) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics",
		Example: `  samsa topic list
  samsa topic list --internal -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			list := adm.ListTopics
			if internal {
				list = adm.ListTopicsWithInternal
			}
			details, err := list(ctx)
			if err != nil {
				return g.explain("list topics", err)
			}
			return renderTopicList(g.newOutput(cmd), details)
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics such as __consumer_offsets")
	return cmd
}

func renderTopicList(o *output, details kadm.TopicDetails) error {
	rows := []topicSummary{}
	for _, d := range details.Sorted() {
		rows = append(rows, topicSummary{
			Topic:             d.Topic,
			Partitions:        len(d.Partitions),
			ReplicationFactor: d.Partitions.NumReplicas(),
			Internal:          d.IsInternal,
		})
	}
	return o.render(struct {
		Topics []topicSummary `json:"topics"`
	}{rows}, func(w io.Writer) {
		t := newTable(w, "TOPIC", "PARTITIONS", "REPLICAS")
		for _, r := range rows {
			t.row(r.Topic, r.Partitions, r.ReplicationFactor)
		}
		t.flush()
	})
}

func newTopicDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME...",
		Aliases: []string{"rm"},
		Short:   "Delete topics and all their records",
		Example: `  samsa topic delete orders
  samsa topic delete scratch-1 scratch-2`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, names []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteTopics(ctx, names...)
			if err != nil {
				return g.explain("delete topics", err)
			}
			return renderDeleted(g, g.newOutput(cmd), names, resps)
		},
	}
}

// topicResult is one topic's outcome in `topic delete`.
type topicResult struct {
	Topic string `json:"topic"`
	Error string `json:"error,omitempty"`
}

func renderDeleted(g *globals, o *output, names []string, resps kadm.DeleteTopicResponses) error {
	var results []topicResult
	var failed []error
	for _, name := range names {
		r := topicResult{Topic: name}
		resp, ok := resps[name]
		switch {
		case !ok:
			r.Error = "missing from the broker's answer"
		case resp.Err != nil:
			err := g.explain(fmt.Sprintf("delete topic %q", name), withBrokerMessage(resp.Err, resp.ErrMessage))
			r.Error = err.Error()
		}
		if r.Error != "" {
			failed = append(failed, errors.New(r.Error))
		}
		results = append(results, r)
	}
	err := o.render(struct {
		Topics []topicResult `json:"topics"`
	}{results}, func(w io.Writer) {
		for _, r := range results {
			if r.Error == "" {
				fmt.Fprintf(w, "deleted topic %q\n", r.Topic)
			}
		}
	})
	if err != nil {
		return err
	}
	return errors.Join(failed...)
}

func newTopicAlterConfigCmd(g *globals) *cobra.Command {
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "alter-config NAME",
		Short: "Set or remove topic configs",
		Long: `Change a topic's configuration incrementally (IncrementalAlterConfigs): --set
overrides a property, --delete removes the override so the broker default applies.`,
		Example: `  samsa topic alter-config orders --set retention.ms=86400000
  samsa topic alter-config orders --set min.insync.replicas=2 --delete cleanup.policy`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			ops, err := alterOps(sets, deletes)
			if err != nil {
				return err
			}
			return runAlterConfig(cmd, g, a[0], ops)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&deletes, "delete", nil, "config key to remove (repeatable)")
	return cmd
}

// alterOps turns --set and --delete flags into incremental config operations.
func alterOps(sets, deletes []string) ([]kadm.AlterConfig, error) {
	if len(sets) == 0 && len(deletes) == 0 {
		return nil, usagef("nothing to change: give --set key=value or --delete key")
	}
	set, err := parseConfigPairs(sets, "--set")
	if err != nil {
		return nil, err
	}
	var ops []kadm.AlterConfig
	for _, k := range sortedKeys(set) {
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set[k]})
	}
	for _, k := range deletes {
		if k = strings.TrimSpace(k); k == "" || strings.Contains(k, "=") {
			return nil, usagef("--delete takes a config name, not %q", k)
		}
		if _, both := set[k]; both {
			return nil, usagef("config %q is both set and deleted", k)
		}
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return ops, nil
}

// configsAltered is the JSON result of `topic alter-config`, `group alter-config` and
// `cluster config set`.
type configsAltered struct {
	Topic string `json:"topic,omitempty"`
	Group string `json:"group,omitempty"`
	// Broker is the node whose configs were altered; ClusterDefault is set instead
	// when the cluster-wide default was.
	Broker         *int32            `json:"broker,omitempty"`
	ClusterDefault bool              `json:"cluster_default,omitempty"`
	Set            map[string]string `json:"set"`
	Deleted        []string          `json:"deleted"`
}

func runAlterConfig(cmd *cobra.Command, g *globals, name string, ops []kadm.AlterConfig) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	resps, err := adm.AlterTopicConfigs(ctx, ops, name)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = withBrokerMessage(r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		return g.explain(fmt.Sprintf("alter configs of topic %q", name), err)
	}
	return renderAltered(g.newOutput(cmd), configsAltered{Topic: name}, "topic "+strconv.Quote(name), ops)
}

// renderAltered reports the operations applied to the resource res names; what
// names it in the text ("topic \"orders\"").
func renderAltered(o *output, res configsAltered, what string, ops []kadm.AlterConfig) error {
	res.Set, res.Deleted = map[string]string{}, []string{}
	for _, op := range ops {
		if op.Op == kadm.SetConfig {
			res.Set[op.Name] = *op.Value
		} else {
			res.Deleted = append(res.Deleted, op.Name)
		}
	}
	return o.render(res, func(w io.Writer) {
		for _, k := range sortedKeys(res.Set) {
			fmt.Fprintf(w, "set %s=%s on %s\n", k, res.Set[k], what)
		}
		for _, k := range res.Deleted {
			fmt.Fprintf(w, "removed %s from %s (the default applies)\n", k, what)
		}
	})
}

func newTopicAddPartitionsCmd(g *globals) *cobra.Command {
	var total int
	cmd := &cobra.Command{
		Use:   "add-partitions NAME --total N",
		Short: "Grow a topic to N partitions",
		Long: `Grow a topic to a total of N partitions. Partitions can only be added, never
removed. Producers that pick the partition by hashing the key will send a key to a
different partition after the change, so per-key ordering does not hold across it.`,
		Example: `  samsa topic add-partitions orders --total 12`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if total < 1 {
				return usagef("--total N is required and must be at least 1")
			}
			if total > math.MaxInt32 {
				return usagef("--total must be at most %d (a partition count is a 32-bit number), not %d", math.MaxInt32, total)
			}
			return runAddPartitions(cmd, g, a[0], total)
		},
	}
	cmd.Flags().IntVar(&total, "total", 0, "the partition count the topic should have")
	return cmd
}

// partitionsAdded is the JSON result of `topic add-partitions`.
type partitionsAdded struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
}

func runAddPartitions(cmd *cobra.Command, g *globals, name string, total int) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	o := g.newOutput(cmd)
	o.warnf("adding partitions changes which partition a key hashes to: records with the same key "+
		"produced before and after this change may land on different partitions, so per-key ordering "+
		"breaks across it (topic %q)", name)
	resps, err := adm.UpdatePartitions(ctx, total, name)
	if err == nil {
		if r, ok := resps[name]; ok && r.Err != nil {
			err = withBrokerMessage(r.Err, r.ErrMessage)
		}
	}
	if err != nil {
		return g.explain(fmt.Sprintf("add partitions to topic %q", name), err)
	}
	return o.render(partitionsAdded{Topic: name, Partitions: total}, func(w io.Writer) {
		fmt.Fprintf(w, "topic %q now has %d partitions\n", name, total)
	})
}

// parseConfigPairs parses repeated key=value flags.
func parseConfigPairs(pairs []string, flag string) (map[string]*string, error) {
	out := make(map[string]*string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("%s wants key=value, not %q", flag, p)
		}
		if _, dup := out[k]; dup {
			return nil, usagef("%s: config %q given twice", flag, k)
		}
		out[k] = ptr(v)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// topicExists checks that name exists, with an error that says what to do if not.
func topicExists(ctx context.Context, g *globals, adm *kadm.Client, name string) (kadm.TopicDetail, error) {
	md, err := adm.Metadata(ctx, name)
	if err != nil {
		return kadm.TopicDetail{}, g.explain("read metadata", err)
	}
	d, ok := md.Topics[name]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return kadm.TopicDetail{}, fmt.Errorf("topic %q does not exist; see `samsa topic list`", name)
	}
	if d.Err != nil {
		return kadm.TopicDetail{}, g.explain(fmt.Sprintf("read metadata of topic %q", name), d.Err)
	}
	return d, nil
}

func newTopicDescribeCmd(g *globals) *cobra.Command {
	var allConfigs bool
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's partitions, offsets, size and configs",
		Long: `Show each partition's leader, replicas, in-sync replicas, log start and end
offsets and size on disk, then the topic's configs. Sizes come from DescribeLogDirs
and read "n/a" when the broker does not serve it. Text output lists only configs
that differ from the defaults unless --all-configs is given; JSON lists them all.`,
		Example: `  samsa topic describe orders
  samsa topic describe orders -o json | jq '.partitions[] | {partition, log_end_offset}'`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			desc, err := describeTopic(ctx, g, adm, a[0])
			if err != nil {
				return err
			}
			return renderTopicDescription(g.newOutput(cmd), desc, allConfigs)
		},
	}
	cmd.Flags().BoolVar(&allConfigs, "all-configs", false, "list every config, defaults included (text output)")
	return cmd
}

// topicDescription is the JSON result of `topic describe`. Optional numbers are null
// when the broker could not say.
type topicDescription struct {
	Topic             string `json:"topic"`
	ID                string `json:"id,omitempty"`
	Internal          bool   `json:"internal"`
	ReplicationFactor int    `json:"replication_factor"`
	SizeBytes         *int64 `json:"size_bytes"`
	// The partitions in trouble: without a leader (neither readable nor writable),
	// with replicas out of the ISR, and with fewer in-sync replicas than
	// min.insync.replicas (acks=all writes refused).
	OfflinePartitions         []int32                `json:"offline_partitions"`
	UnderReplicatedPartitions []int32                `json:"under_replicated_partitions"`
	UnderMinISRPartitions     []int32                `json:"under_min_isr_partitions"`
	Partitions                []partitionDescription `json:"partitions"`
	Configs                   []configEntry          `json:"configs"`
	ConfigsError              string                 `json:"configs_error,omitempty"`
}

type partitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	LogStartOffset  *int64  `json:"log_start_offset"`
	LogEndOffset    *int64  `json:"log_end_offset"`
	SizeBytes       *int64  `json:"size_bytes"`
	Error           string  `json:"error,omitempty"`
}

type configEntry struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

func describeTopic(ctx context.Context, g *globals, adm *kadm.Client, name string) (topicDescription, error) {
	d, err := topicExists(ctx, g, adm, name)
	if err != nil {
		return topicDescription{}, err
	}
	desc := topicDescription{
		Topic:             name,
		Internal:          d.IsInternal,
		ReplicationFactor: d.Partitions.NumReplicas(),
		Partitions:        []partitionDescription{},
		Configs:           []configEntry{},

		OfflinePartitions:         []int32{},
		UnderReplicatedPartitions: []int32{},
		UnderMinISRPartitions:     []int32{},
	}
	if d.ID != (kadm.TopicID{}) {
		desc.ID = d.ID.String()
	}
	starts, _ := adm.ListStartOffsets(ctx, name)
	ends, _ := adm.ListEndOffsets(ctx, name)
	sizes := partitionSizes(ctx, adm, d)
	for _, p := range d.Partitions.Sorted() {
		pd := partitionDescription{
			Partition:       p.Partition,
			Leader:          p.Leader,
			LeaderEpoch:     p.LeaderEpoch,
			Replicas:        nonNil(p.Replicas),
			ISR:             nonNil(p.ISR),
			OfflineReplicas: nonNil(p.OfflineReplicas),
			LogStartOffset:  listedOffset(starts, name, p.Partition),
			LogEndOffset:    listedOffset(ends, name, p.Partition),
		}
		if p.Err != nil {
			pd.Error = p.Err.Error()
		}
		if sizes != nil {
			if size, ok := sizes[p.Partition]; ok {
				pd.SizeBytes = ptr(size)
				desc.SizeBytes = ptr(size + valueOr(desc.SizeBytes, 0))
			}
		}
		desc.Partitions = append(desc.Partitions, pd)
	}
	desc.Configs, err = topicConfigs(ctx, adm, name)
	if err != nil {
		desc.ConfigsError = err.Error()
	}
	minISR := -1
	for _, c := range desc.Configs {
		if c.Name == "min.insync.replicas" && c.Value != nil {
			if n, err := strconv.Atoi(*c.Value); err == nil {
				minISR = n
			}
		}
	}
	for _, p := range desc.Partitions {
		switch {
		case p.Leader < 0:
			desc.OfflinePartitions = append(desc.OfflinePartitions, p.Partition)
			continue
		case len(p.ISR) < len(p.Replicas):
			desc.UnderReplicatedPartitions = append(desc.UnderReplicatedPartitions, p.Partition)
		}
		if len(p.ISR) < minISR {
			desc.UnderMinISRPartitions = append(desc.UnderMinISRPartitions, p.Partition)
		}
	}
	return desc, nil
}

// partitionSizes returns each partition's size, or nil when DescribeLogDirs is not
// available.
func partitionSizes(ctx context.Context, adm *kadm.Client, d kadm.TopicDetail) map[int32]int64 {
	var set kadm.TopicsSet
	for p := range d.Partitions {
		set.Add(d.Topic, p)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil && len(dirs) == 0 {
		return nil
	}
	return sizesFromLogDirs(dirs, d)
}

// sizesFromLogDirs picks each partition's size on its leader or, when the leader did
// not report it, the largest replica; future replicas (moves in progress) are ignored.
// It returns nil when no broker reported the topic.
func sizesFromLogDirs(dirs kadm.DescribedAllLogDirs, d kadm.TopicDetail) map[int32]int64 {
	sizes := make(map[int32]int64)
	fromLeader := make(map[int32]bool)
	dirs.Each(func(dir kadm.DescribedLogDir) {
		if dir.Err != nil {
			return
		}
		dir.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic != d.Topic || p.IsFuture || fromLeader[p.Partition] {
				return
			}
			if p.Broker == d.Partitions[p.Partition].Leader {
				sizes[p.Partition], fromLeader[p.Partition] = p.Size, true
			} else if p.Size > sizes[p.Partition] {
				sizes[p.Partition] = p.Size
			}
		})
	})
	if len(sizes) == 0 {
		return nil
	}
	return sizes
}

func topicConfigs(ctx context.Context, adm *kadm.Client, name string) ([]configEntry, error) {
	out := []configEntry{}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return out, err
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return out, err
	}
	for _, c := range rc.Configs {
		out = append(out, configEntry{Name: c.Key, Value: c.Value, Source: configSource(c.Source), Sensitive: c.Sensitive})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// configSource names where a config comes from, in Kafka's words.
func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "DYNAMIC_TOPIC_CONFIG"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "DYNAMIC_BROKER_CONFIG"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "STATIC_BROKER_CONFIG"
	case kmsg.ConfigSourceDefaultConfig:
		return "DEFAULT_CONFIG"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "DYNAMIC_BROKER_LOGGER_CONFIG"
	case kmsg.ConfigSourceClientMetricsConfig:
		return "DYNAMIC_CLIENT_METRICS_CONFIG"
	case kmsg.ConfigSourceGroupConfig:
		return "DYNAMIC_GROUP_CONFIG"
	}
	return "UNKNOWN"
}

func renderTopicDescription(o *output, d topicDescription, allConfigs bool) error {
	return o.render(d, func(w io.Writer) {
		size := "n/a"
		if d.SizeBytes != nil {
			size = humanBytes(*d.SizeBytes)
		}
		fmt.Fprintf(w, "Topic:               %s\n", d.Topic)
		if d.ID != "" {
			fmt.Fprintf(w, "ID:                  %s\n", d.ID)
		}
		fmt.Fprintf(w, "Partitions:          %d\n", len(d.Partitions))
		fmt.Fprintf(w, "Replication factor:  %d\n", d.ReplicationFactor)
		fmt.Fprintf(w, "Size:                %s\n", size)
		for _, trouble := range []struct {
			label, what string
			ids         []int32
		}{
			{"Offline:", "no leader: neither readable nor writable", d.OfflinePartitions},
			{"Under-replicated:", "replicas out of the ISR", d.UnderReplicatedPartitions},
			{"Under min ISR:", "fewer in-sync replicas than min.insync.replicas: acks=all writes refused", d.UnderMinISRPartitions},
		} {
			if len(trouble.ids) > 0 {
				fmt.Fprintf(w, "%-20s %s (%s)\n", trouble.label, partitionList(trouble.ids), trouble.what)
			}
		}
		fmt.Fprintln(w)
		t := newTable(w, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "LOG-END", "SIZE")
		for _, p := range d.Partitions {
			leader, psize := fmt.Sprint(p.Leader), "n/a"
			if p.Leader < 0 {
				leader = "none"
			}
			if p.SizeBytes != nil {
				psize = humanBytes(*p.SizeBytes)
			}
			t.row(p.Partition, leader, p.LeaderEpoch, int32List(p.Replicas), int32List(p.ISR), orDash(int32List(p.OfflineReplicas)),
				optInt(p.LogStartOffset), optInt(p.LogEndOffset), psize)
		}
		t.flush()
		renderConfigs(w, d.Configs, d.ConfigsError, "DYNAMIC_TOPIC_CONFIG", allConfigs)
	})
}

// renderConfigs lists the configs set on the resource itself (source own), or all of
// them, or says why they could not be read (configsError).
func renderConfigs(w io.Writer, configs []configEntry, configsError, own string, all bool) {
	if configsError != "" {
		fmt.Fprintf(w, "\nConfigs: n/a (%s)\n", configsError)
		return
	}
	var shown []configEntry
	for _, c := range configs {
		if all || c.Source == own {
			shown = append(shown, c)
		}
	}
	if !all && len(shown) == 0 {
		fmt.Fprintf(w, "\nConfigs: all defaults (--all-configs lists them)\n")
		return
	}
	fmt.Fprintln(w)
	configTable(w, shown)
}

// configTable lists configs with their values and sources.
func configTable(w io.Writer, configs []configEntry) {
	t := newTable(w, "CONFIG", "VALUE", "SOURCE")
	for _, c := range configs {
		value := "<unset>"
		switch {
		case c.Sensitive:
			value = "<sensitive>"
		case c.Value != nil:
			value = *c.Value
		}
		t.row(c.Name, value, c.Source)
	}
	t.flush()
}

func listedOffset(l kadm.ListedOffsets, topic string, p int32) *int64 {
	o, ok := l.Lookup(topic, p)
	if !ok || o.Err != nil || o.Offset < 0 {
		return nil
	}
	return ptr(o.Offset)
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return slices.Clone(ids)
}

func valueOr(v *int64, def int64) int64 {
	if v == nil {
		return def
	}
	return *v
}

// partitionList renders "partition 3" or "partitions 0,2".
func partitionList(ids []int32) string {
	if len(ids) == 1 {
		return "partition " + int32List(ids)
	}
	return "partitions " + int32List(ids)
}
