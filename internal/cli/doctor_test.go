package cli

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func healthyTopic(name string, partitions int, rf int32, configs map[string]string) TopicSnapshot {
	t := TopicSnapshot{Name: name, Configs: configs}
	for i := range partitions {
		var replicas []int32
		for r := range rf {
			replicas = append(replicas, r+1)
		}
		t.Partitions = append(t.Partitions, PartitionSnapshot{ID: int32(i), Leader: 1, Replicas: replicas, ISR: replicas})
	}
	return t
}

func defaults(minISR string) map[string]string {
	return map[string]string{"min.insync.replicas": minISR, "unclean.leader.election.enable": "false"}
}

func members(assigned ...int) []MemberSnapshot {
	var out []MemberSnapshot
	for i, n := range assigned {
		out = append(out, MemberSnapshot{ID: "m" + string(rune('a'+i)), Assigned: n})
	}
	return out
}

func lagSample(state string, ms []MemberSnapshot, lags ...int64) GroupSample {
	s := GroupSample{State: state, Members: ms, Lag: map[string]map[int32]int64{"t": {}}}
	for p, l := range lags {
		s.Lag["t"][int32(p)] = l
	}
	return s
}

func codes(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func TestDiagnose(t *testing.T) {
	stable3 := members(1, 1, 1)
	tests := []struct {
		name string
		snap Snapshot
		want []string
	}{
		{
			name: "healthy single node cluster",
			snap: Snapshot{Window: 10 * time.Second,
				Topics: []TopicSnapshot{healthyTopic("t", 3, 1, defaults("1"))},
				Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3}, Samples: []GroupSample{
					lagSample("Stable", stable3, 5, 4, 6), lagSample("Stable", stable3, 0, 1, 2), lagSample("Stable", stable3, 3, 3, 3),
				}}}},
			want: nil,
		},
		{
			name: "healthy replicated topic",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 2, 3, defaults("2"))}},
			want: nil,
		},
		{
			name: "offline and under-replicated partitions",
			snap: Snapshot{Topics: []TopicSnapshot{{Name: "t", Configs: defaults("2"), Partitions: []PartitionSnapshot{
				{ID: 0, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: nil},
				{ID: 1, Leader: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2}},
				{ID: 2, Leader: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			}}}},
			want: []string{CodeOfflinePartitions, CodeUnderMinISR, CodeUnderReplicated},
		},
		{
			name: "in-sync replicas below min.insync.replicas",
			snap: Snapshot{Topics: []TopicSnapshot{{Name: "t", Configs: defaults("2"), Partitions: []PartitionSnapshot{
				{ID: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}},
				{ID: 1, Leader: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}},
			}}}},
			want: []string{CodeUnderMinISR, CodeUnderReplicated},
		},
		{
			name: "replication factor one in a cluster of three brokers",
			snap: Snapshot{Brokers: []BrokerSnapshot{{ID: 1}, {ID: 2}, {ID: 3}}, Topics: []TopicSnapshot{healthyTopic("t", 2, 1, defaults("1"))}},
			want: []string{CodeReplicationFactorOne},
		},
		{
			name: "an offline log directory",
			snap: Snapshot{Brokers: []BrokerSnapshot{{ID: 1}, {ID: 2, OfflineLogDirs: []string{"/data/b"}}, {ID: 3}},
				Topics: []TopicSnapshot{healthyTopic("t", 2, 3, defaults("2"))}},
			want: []string{CodeOfflineLogDir},
		},
		{
			name: "replication factor one on a single broker is fine",
			snap: Snapshot{Brokers: []BrokerSnapshot{{ID: 1}}, Topics: []TopicSnapshot{healthyTopic("t", 2, 1, defaults("1"))}},
			want: nil,
		},
		{
			name: "every replica of a partition in one rack",
			snap: Snapshot{Brokers: []BrokerSnapshot{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}}, Topics: []TopicSnapshot{{Name: "t", Configs: defaults("1"),
				Partitions: []PartitionSnapshot{
					{ID: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
					{ID: 1, Leader: 1, Replicas: []int32{1, 3}, ISR: []int32{1, 3}},
				}}}},
			want: []string{CodeReplicasInOneRack},
		},
		{
			name: "one rack in the whole cluster is not reported",
			snap: Snapshot{Brokers: []BrokerSnapshot{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "a"}}, Topics: []TopicSnapshot{healthyTopic("t", 1, 2, defaults("1"))}},
			want: nil,
		},
		{
			name: "replicas on brokers without a rack are not judged",
			snap: Snapshot{Brokers: []BrokerSnapshot{{ID: 1, Rack: ""}, {ID: 2, Rack: ""}, {ID: 3, Rack: "b"}}, Topics: []TopicSnapshot{healthyTopic("t", 1, 2, defaults("1"))}},
			want: nil,
		},
		{
			name: "min.insync.replicas above replication factor",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 1, defaults("2"))}},
			want: []string{CodeMinISRAboveRF},
		},
		{
			name: "min.insync.replicas equal to a replication factor above one",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 3, defaults("3"))}},
			want: []string{CodeMinISREqualsRF},
		},
		{
			name: "min.insync.replicas equal to replication factor one is not reported",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 1, defaults("1"))}},
			want: nil,
		},
		{
			name: "min.insync.replicas one with replication factor three",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 3, defaults("1"))}},
			want: []string{CodeMinISROne},
		},
		{
			name: "min.insync.replicas one with replication factor two is fine",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 2, defaults("1"))}},
			want: nil,
		},
		{
			name: "unclean leader election enabled",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 1, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})}},
			want: []string{CodeUncleanLeaderElection},
		},
		{
			name: "configs unknown: no config findings",
			snap: Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 1, 1, nil)}},
			want: nil,
		},
		{
			name: "four members on three partitions",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("Stable", members(1, 1, 1, 0), 0, 0, 0)}}}},
			want: []string{CodeIdleConsumers},
		},
		{
			name: "idle members are not judged mid-rebalance",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("CompletingRebalance", members(0, 0, 0, 0), 0, 0, 0)}}}},
			want: nil,
		},
		{
			name: "lag concentrated on one partition",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("Empty", nil, 900, 50, 50)}}}},
			want: []string{CodeLagSkew},
		},
		{
			name: "skew below the minimum total lag is noise",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("Empty", nil, 90, 1, 1)}}}},
			want: nil,
		},
		{
			name: "even lag is not skew",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("Empty", nil, 400, 350, 300)}}}},
			want: nil,
		},
		{
			name: "over half but not twice the mean is not skew",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 2},
				Samples: []GroupSample{lagSample("Empty", nil, 600, 400)}}}},
			want: nil,
		},
		{
			name: "lag growing through the window",
			snap: Snapshot{Window: 8 * time.Second, Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{
					lagSample("Stable", stable3, 10, 10, 10), lagSample("Stable", stable3, 20, 20, 20),
					lagSample("Stable", stable3, 30, 30, 30), lagSample("Stable", stable3, 40, 40, 40),
					lagSample("Stable", stable3, 50, 50, 50),
				}}}},
			want: []string{CodeLagGrowing},
		},
		{
			name: "a commit sawtooth is not growth",
			snap: Snapshot{Window: 8 * time.Second, Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{
					lagSample("Stable", stable3, 10, 10, 10), lagSample("Stable", stable3, 30, 30, 30),
					lagSample("Stable", stable3, 5, 5, 5), lagSample("Stable", stable3, 30, 30, 30),
					lagSample("Stable", stable3, 40, 40, 40),
				}}}},
			want: nil,
		},
		{
			name: "one sample cannot show growth or rebalancing",
			snap: Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("PreparingRebalance", stable3, 10, 10, 10)}}}},
			want: nil,
		},
		{
			name: "rebalancing state seen during the window",
			snap: Snapshot{Window: time.Second, Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("Stable", stable3, 0, 0, 0), lagSample("PreparingRebalance", stable3, 0, 0, 0), lagSample("Stable", stable3, 0, 0, 0)}}}},
			want: []string{CodeGroupRebalancing},
		},
		{
			name: "membership changed during the window",
			snap: Snapshot{Window: time.Second, Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
				Samples: []GroupSample{lagSample("Stable", members(2, 1), 0, 0, 0), lagSample("Stable", stable3, 0, 0, 0)}}}},
			want: []string{CodeGroupRebalancing},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := codes(Diagnose(tt.snap))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("codes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiagnoseNumbersAndFix(t *testing.T) {
	fs := Diagnose(Snapshot{Groups: []GroupSnapshot{{Name: "g", TopicPartitions: map[string]int{"t": 3},
		Samples: []GroupSample{lagSample("Empty", nil, 50, 900, 50)}}}})
	if len(fs) != 1 {
		t.Fatalf("findings = %v", fs)
	}
	f := fs[0]
	want := map[string]int64{"partition": 1, "partition_lag": 900, "total_lag": 1000, "share_percent": 90, "mean_lag": 333}
	for k, v := range want {
		if f.Numbers[k] != v {
			t.Errorf("numbers[%s] = %d, want %d", k, f.Numbers[k], v)
		}
	}
	if f.Group != "g" || f.Topic != "t" || !slices.Equal(f.Partitions, []int32{1}) || f.Fix == "" || f.Severity != severityWarning {
		t.Errorf("finding = %+v", f)
	}
}

func TestDiagnoseOrderIsDeterministic(t *testing.T) {
	snap := Snapshot{Topics: []TopicSnapshot{
		healthyTopic("b", 1, 1, map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}),
		healthyTopic("a", 1, 1, map[string]string{"min.insync.replicas": "2"}),
	}}
	var got []string
	for _, f := range Diagnose(snap) {
		got = append(got, f.Topic+"/"+f.Code)
	}
	want := []string{"a/" + CodeMinISRAboveRF, "b/" + CodeMinISRAboveRF, "b/" + CodeUncleanLeaderElection}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
}

func TestDiagnoseBrokerSecurity(t *testing.T) {
	base := map[string]string{
		"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT",
		"controller.listener.names":      "CONTROLLER",
		"allow.everyone.if.no.acl.found": "false",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tt := range []struct {
		name    string
		configs map[string]string
		want    []string
	}{
		{"loopback PLAINTEXT is fine", with("listeners", "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093"), nil},
		{"PLAINTEXT on every interface", with("listeners", "PLAINTEXT://:9092,SASL_SSL://0.0.0.0:9093"), []string{CodePlaintextWithAuthorizer}},
		{"a custom PLAINTEXT listener", with("listeners", "INTERNAL://10.0.0.5:9094"), []string{CodePlaintextWithAuthorizer}},
		{"no authorizer", with("authorizer.class.name", "", "listeners", "PLAINTEXT://0.0.0.0:9092"), nil},
		{"allow everyone", with("listeners", "SASL_SSL://0.0.0.0:9093", "allow.everyone.if.no.acl.found", "true"), []string{CodeAllowEveryoneNoACL}},
		{"unreadable configs", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var codes []string
			for _, f := range Diagnose(Snapshot{Brokers: []BrokerSnapshot{{ID: 1, Configs: tt.configs}}}) {
				codes = append(codes, f.Code)
				if f.Fix == "" || f.Numbers["broker"] != 1 {
					t.Errorf("finding %+v lacks its fix or broker", f)
				}
			}
			if strings.Join(codes, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("codes %v, want %v", codes, tt.want)
			}
		})
	}
}

// TestDiagnoseTransactions: a last stable offset that stood still across the window,
// a hanging transaction and a long-open one are reported; one that moved is not; a
// group caught up with a stuck last stable offset has its lag attributed to it.
func TestDiagnoseTransactions(t *testing.T) {
	unstable := func(p int32, sampled, moved bool, txnID string, openFor time.Duration) UnstablePartition {
		return UnstablePartition{Topic: "t", Partition: p, LastStable: 100, HighWatermark: 150, Sampled: sampled, Moved: moved,
			ProducerID: 7, TransactionalID: txnID, OpenFor: openFor}
	}
	group := GroupSnapshot{Name: "g", TopicPartitions: map[string]int{"t": 4}, Samples: []GroupSample{
		lagSample("Stable", members(2, 2), 50, 50, 0, 0)}}
	tests := []struct {
		name     string
		unstable []UnstablePartition
		want     []string
		severity string
	}{
		{"moving", []UnstablePartition{unstable(0, true, true, "app", time.Second)}, nil, ""},
		{"not sampled, young", []UnstablePartition{unstable(0, false, false, "app", time.Second)}, nil, ""},
		{"stood still", []UnstablePartition{unstable(0, true, false, "app", time.Second)},
			[]string{CodeLSOStuck, CodeLagHeldByTransaction}, severityWarning},
		{"open for long", []UnstablePartition{unstable(1, false, false, "app", 2*time.Minute)},
			[]string{CodeLSOStuck, CodeLagHeldByTransaction}, severityWarning},
		{"hanging", []UnstablePartition{unstable(3, false, false, "", 0)}, []string{CodeLSOStuck}, severityError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := Diagnose(Snapshot{Topics: []TopicSnapshot{healthyTopic("t", 4, 1, defaults("1"))},
				Groups: []GroupSnapshot{group}, Unstable: tc.unstable})
			if got := codes(fs); !slices.Equal(got, tc.want) {
				t.Fatalf("codes %v, want %v", got, tc.want)
			}
			for _, f := range fs {
				if f.Code == CodeLSOStuck && (f.Severity != tc.severity || f.Numbers["held_records"] != 50) {
					t.Errorf("lso_stuck: %+v", f)
				}
			}
		})
	}
}

func TestDiagnosePlacementNumbers(t *testing.T) {
	fs := Diagnose(Snapshot{Brokers: []BrokerSnapshot{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "c"}}, Topics: []TopicSnapshot{{Name: "t", Configs: defaults("2"),
		Partitions: []PartitionSnapshot{
			{ID: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}},
			{ID: 1, Leader: 2, Replicas: []int32{2, 1}, ISR: []int32{2, 1}},
		}}}})
	byCode := map[string]Finding{}
	for _, f := range fs {
		byCode[f.Code] = f
	}
	if f := byCode[CodeUnderMinISR]; !slices.Equal(f.Partitions, []int32{0}) || f.Numbers["min_insync_replicas"] != 2 || f.Severity != severityError {
		t.Errorf("under_min_isr finding %+v", f)
	}
	if f := byCode[CodeReplicasInOneRack]; !slices.Equal(f.Partitions, []int32{1}) || f.Numbers["racks"] != 3 || f.Numbers["partitions_in_one_rack"] != 1 {
		t.Errorf("replicas_in_one_rack finding %+v", f)
	}
}

// TestDiagnoseMixedBuilds: brokers serving different versions of an API are one
// mixed_builds finding naming the APIs, the versions and the brokers behind; brokers
// of one build, or versions not read, are not.
func TestDiagnoseMixedBuilds(t *testing.T) {
	newer := map[int16]int16{0: 13, 27: 2, 62: 4, 75: 0}
	older := map[int16]int16{0: 13, 27: 1, 62: 3}
	got := Diagnose(Snapshot{Brokers: []BrokerSnapshot{{ID: 1, APIVersions: newer}, {ID: 2, APIVersions: older}, {ID: 3, APIVersions: newer}}})
	if len(got) != 1 || got[0].Code != CodeMixedBuilds {
		t.Fatalf("findings %+v, want one %s", got, CodeMixedBuilds)
	}
	f := got[0]
	for _, want := range []string{"3 APIs", "WriteTxnMarkers up to v2 on brokers 1, 3, up to v1 on broker 2",
		"BrokerRegistration up to v4 on brokers 1, 3, up to v3 on broker 2", "DescribeTopicPartitions up to v0 on brokers 1, 3, not served on broker 2"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q lacks %q", f.Message, want)
		}
	}
	if !strings.Contains(f.Fix, "on broker 2,") || f.Numbers["apis_differing"] != 3 || f.Numbers["brokers_behind"] != 1 {
		t.Errorf("finding %+v: want the fix to name broker 2, 3 APIs differing, 1 broker behind", f)
	}
	for _, brokers := range [][]BrokerSnapshot{
		{{ID: 1, APIVersions: newer}, {ID: 2, APIVersions: newer}},
		{{ID: 1, APIVersions: newer}, {ID: 2}}, // not read
	} {
		if got := Diagnose(Snapshot{Brokers: brokers}); len(got) != 0 {
			t.Errorf("brokers %+v: findings %+v, want none", brokers, got)
		}
	}
}
