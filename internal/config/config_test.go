package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultsMatchKafka(t *testing.T) {
	b := Default()
	// Kafka's documented defaults (Samsa's own where Kafka has none: node.id,
	// process.roles, log.dir, listeners).
	want := map[string]any{
		"NodeID":                                      int32(1),
		"ProcessRoles":                                []string{"broker", "controller"},
		"ControllerQuorumVoters":                      "",
		"LogDirs":                                     []string{"./samsa-data"},
		"Listeners":                                   []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		"AdvertisedListeners":                         []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		"NumPartitions":                               int32(1),
		"DefaultReplicationFactor":                    int16(1),
		"AutoCreateTopicsEnable":                      true,
		"DeleteTopicEnable":                           true,
		"LogSegmentBytes":                             int64(1073741824),
		"LogRollMs":                                   int64(168 * 3600 * 1000),
		"LogRollJitterMs":                             int64(0),
		"LogRetentionMs":                              int64(168 * 3600 * 1000),
		"LogRetentionBytes":                           int64(-1),
		"LogRetentionCheckIntervalMs":                 int64(300000),
		"LogIndexIntervalBytes":                       int32(4096),
		"LogIndexSizeMaxBytes":                        int32(10485760),
		"LogFlushIntervalMessages":                    int64(math.MaxInt64),
		"LogFlushIntervalMs":                          int64(-1),
		"LogFlushSchedulerIntervalMs":                 int64(math.MaxInt64),
		"LogPreallocate":                              false,
		"LogCleanupPolicy":                            []string{"delete"},
		"CompressionGzipLevel":                        int32(-1),
		"CompressionLz4Level":                         int32(9),
		"CompressionZstdLevel":                        int32(3),
		"LogMessageTimestampType":                     "CreateTime",
		"LogMessageTimestampBeforeMaxMs":              int64(math.MaxInt64),
		"LogMessageTimestampAfterMaxMs":               int64(math.MaxInt64),
		"LogMessageTimestampDifferenceMaxMs":          int64(math.MaxInt64),
		"CompressionType":                             "producer",
		"MessageMaxBytes":                             int32(1048588),
		"SocketRequestMaxBytes":                       int32(104857600),
		"MinInsyncReplicas":                           int32(1),
		"UncleanLeaderElectionEnable":                 false,
		"LogDeleteDelayMs":                            int64(60000),
		"OffsetsTopicNumPartitions":                   int32(50),
		"OffsetsTopicReplicationFactor":               int16(3),
		"OffsetsTopicSegmentBytes":                    int64(104857600),
		"OffsetsRetentionMinutes":                     int64(10080),
		"OffsetsRetentionCheckIntervalMs":             int64(600000),
		"OffsetsCommitTimeoutMs":                      int32(5000),
		"OffsetMetadataMaxBytes":                      int32(4096),
		"GroupInitialRebalanceDelayMs":                int32(3000),
		"GroupMinSessionTimeoutMs":                    int32(6000),
		"GroupMaxSessionTimeoutMs":                    int32(1800000),
		"GroupMaxSize":                                int32(math.MaxInt32),
		"GroupConsumerSessionTimeoutMs":               int32(45000),
		"GroupConsumerMinSessionTimeoutMs":            int32(45000),
		"GroupConsumerMaxSessionTimeoutMs":            int32(60000),
		"GroupConsumerHeartbeatIntervalMs":            int32(5000),
		"GroupConsumerMinHeartbeatIntervalMs":         int32(5000),
		"GroupConsumerMaxHeartbeatIntervalMs":         int32(15000),
		"GroupConsumerMaxSize":                        int32(math.MaxInt32),
		"GroupConsumerAssignmentIntervalMs":           int32(1000),
		"GroupConsumerMinAssignmentIntervalMs":        int32(0),
		"GroupConsumerMaxAssignmentIntervalMs":        int32(15000),
		"GroupConsumerAssignors":                      []string{"uniform", "range"},
		"GroupConsumerMigrationPolicy":                "bidirectional",
		"GroupCoordinatorRebalanceProtocols":          []string{"classic", "consumer", "streams"},
		"MaxIncrementalFetchSessionCacheSlots":        int32(1000),
		"GroupShareSessionTimeoutMs":                  int32(45000),
		"GroupShareMinSessionTimeoutMs":               int32(45000),
		"GroupShareMaxSessionTimeoutMs":               int32(60000),
		"GroupShareMinHeartbeatIntervalMs":            int32(5000),
		"GroupShareMaxHeartbeatIntervalMs":            int32(15000),
		"GroupShareHeartbeatIntervalMs":               int32(5000),
		"GroupShareMaxSize":                           int32(200),
		"GroupShareAssignmentIntervalMs":              int32(1000),
		"GroupShareMinAssignmentIntervalMs":           int32(0),
		"GroupShareMaxAssignmentIntervalMs":           int32(15000),
		"GroupShareRecordLockDurationMs":              int32(30000),
		"GroupShareMinRecordLockDurationMs":           int32(15000),
		"GroupShareMaxRecordLockDurationMs":           int32(60000),
		"GroupShareDeliveryCountLimit":                int32(5),
		"GroupShareMinDeliveryCountLimit":             int32(2),
		"GroupShareMaxDeliveryCountLimit":             int32(10),
		"GroupSharePartitionMaxRecordLocks":           int32(2000),
		"GroupShareMinPartitionMaxRecordLocks":        int32(100),
		"GroupShareMaxPartitionMaxRecordLocks":        int32(4000),
		"ShareCoordinatorStateTopicNumPartitions":     int32(50),
		"ShareCoordinatorStateTopicReplicationFactor": int16(3),
		"ShareCoordinatorStateTopicMinIsr":            int16(2),
		"ShareCoordinatorStateTopicSegmentBytes":      int64(104857600),
		"ConnectionsMaxIdleMs":                        int64(600000),
		"ReplicaLagTimeMaxMs":                         int64(30000),
		"ReplicaFetchWaitMaxMs":                       int32(500),
		"ReplicaFetchMinBytes":                        int32(1),
		"GroupShareMaxShareSessions":                  int32(2000),
		"FetchMaxBytes":                               int32(57671680),
		"ReplicaFetchMaxBytes":                        int32(1048576),
		"ReplicaFetchResponseMaxBytes":                int32(10485760),
		"ReplicaFetchBackoffMs":                       int32(1000),
		"ReplicaSocketTimeoutMs":                      int32(30000),
		"ReplicaSelectorClass":                        "",
		"TransactionalIDExpirationMs":                 int32(604800000),
		"TransactionMaxTimeoutMs":                     int32(900000),
		"ProducerIDExpirationMs":                      int32(86400000),
		"LogCleanerEnable":                            true,
		"LogCleanerThreads":                           int32(1),
		"LogCleanerBackoffMs":                         int64(15000),
		"LogCleanerMinCleanableRatio":                 0.5,
		"LogCleanerDeleteRetentionMs":                 int64(86400000),
		"LogCleanerMinCompactionLagMs":                int64(0),
		"LogCleanerMaxCompactionLagMs":                int64(math.MaxInt64),
		"LogCleanerIoMaxBytesPerSecond":               math.MaxFloat64,
		"MetricsListener":                             "",
		"ConsoleListener":                             "",
		"ConsoleAllowedHosts":                         []string(nil),
		"ControllerListenerNames":                     []string{"CONTROLLER"},
		"InterBrokerListenerName":                     "PLAINTEXT",
		"BrokerRack":                                  "",
		"BrokerHeartbeatIntervalMs":                   int32(2000),
		"BrokerSessionTimeoutMs":                      int32(9000),
		"ControllerQuorumElectionTimeoutMs":           int32(1000),
		"ControllerQuorumFetchTimeoutMs":              int32(2000),
		"ControllerQuorumRequestTimeoutMs":            int32(2000),
		"ControllerQuorumRetryBackoffMs":              int32(20),
		"ControlledShutdownEnable":                    true,
		"MetadataLogDir":                              "",
		"AutoLeaderRebalanceEnable":                   true,
		"LeaderImbalanceCheckIntervalSeconds":         int64(300),
		"LeaderImbalancePerBrokerPercentage":          int32(10),
		"TransactionStateLogNumPartitions":            int32(50),
		"TransactionStateLogReplicationFactor":        int16(3),
		"TransactionStateLogMinIsr":                   int32(2),
		"Security": Security{
			ProtocolMap:                      map[string]string{"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"},
			SaslMechanismInterBroker:         "GSSAPI",
			SaslMechanismController:          "GSSAPI",
			SaslServerMaxReceiveSize:         524288,
			FailedAuthenticationDelayMs:      100,
			AuthorizerLogLevel:               "INFO",
			MaxConnections:                   math.MaxInt32,
			MaxConnectionsPerIP:              math.MaxInt32,
			MaxConnectionsPerIPOverrides:     map[string]int32{},
			MaxConnectionCreationRate:        2147483647,
			ConnectionsMaxSetupMs:            10000,
			QuotaWindowNum:                   11,
			QuotaWindowSizeSeconds:           1,
			ControllerQuotaWindowNum:         11,
			ControllerQuotaWindowSizeSeconds: 1,
			DelegationTokenMaxLifetimeMs:     604800000,
			DelegationTokenExpiryTimeMs:      86400000,
			DelegationTokenExpiryCheckMs:     3600000,
		},
		"TransactionStateLogSegmentBytes":           int64(104857600),
		"TransactionAbortTimedOutCleanupIntervalMs": int32(10000),
		"TransactionRemoveExpiredCleanupIntervalMs": int32(3600000),
		"TransactionPartitionVerificationEnable":    true,
		"AddPartitionsToTxnRetryBackoffMs":          int32(20),
		"AddPartitionsToTxnRetryBackoffMaxMs":       int32(100),
		"Raw":                                       map[string]string{},
		"DynamicDefault":                            map[string]string(nil),
		"DynamicBroker":                             map[string]string(nil),
	}
	v := reflect.ValueOf(b).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		w, ok := want[name]
		if !ok {
			t.Errorf("field %s has no expected default in this test", name)
			continue
		}
		if got := v.Field(i).Interface(); !reflect.DeepEqual(got, w) {
			t.Errorf("Default().%s = %#v, want %#v", name, got, w)
		}
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	loaded, err := Load("", nil)
	if err != nil {
		t.Fatalf("Load(\"\", nil) = %v", err)
	}
	if !reflect.DeepEqual(loaded, b) {
		t.Errorf("Load with nothing differs from Default:\n%+v\n%+v", loaded, b)
	}
}

// The default of every row in the table must parse under its own bounds, and the
// field it sets must read back the same value.
func TestTableDefaultsRoundTrip(t *testing.T) {
	b := Default()
	for _, p := range brokerProperties {
		if p.null {
			continue
		}
		if err := p.spec.check(p.def); err != nil {
			t.Errorf("%s: default %q fails its own check: %v", p.name, p.def, err)
		}
		if p.set != nil && p.get != nil && p.get(b) != p.def {
			t.Errorf("%s: field reads %q, default is %q", p.name, p.get(b), p.def)
		}
	}
}

func TestTimePrecedence(t *testing.T) {
	const hour, minute = int64(3_600_000), int64(60_000)
	tests := []struct {
		name      string
		overrides []string
		retention int64
		roll      int64
		jitter    int64
	}{
		{"defaults", nil, 168 * hour, 168 * hour, 0},
		{"hours", []string{"log.retention.hours=2", "log.roll.hours=3", "log.roll.jitter.hours=1"}, 2 * hour, 3 * hour, hour},
		{"minutes beat hours", []string{"log.retention.hours=2", "log.retention.minutes=5"}, 5 * minute, 168 * hour, 0},
		{"ms beats minutes and hours", []string{"log.retention.hours=2", "log.retention.minutes=5", "log.retention.ms=1234"}, 1234, 168 * hour, 0},
		{"roll ms beats hours", []string{"log.roll.hours=3", "log.roll.ms=777", "log.roll.jitter.hours=2", "log.roll.jitter.ms=55"}, 168 * hour, 777, 55},
		{"ms -1 is unlimited", []string{"log.retention.ms=-1"}, -1, 168 * hour, 0},
		{"negative hours are unlimited", []string{"log.retention.hours=-3"}, -1, 168 * hour, 0},
		{"negative minutes are unlimited", []string{"log.retention.minutes=-1", "log.retention.hours=5"}, -1, 168 * hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load("", tt.overrides)
			if err != nil {
				t.Fatal(err)
			}
			if b.LogRetentionMs != tt.retention {
				t.Errorf("LogRetentionMs = %d, want %d", b.LogRetentionMs, tt.retention)
			}
			if b.LogRollMs != tt.roll {
				t.Errorf("LogRollMs = %d, want %d", b.LogRollMs, tt.roll)
			}
			if b.LogRollJitterMs != tt.jitter {
				t.Errorf("LogRollJitterMs = %d, want %d", b.LogRollJitterMs, tt.jitter)
			}
		})
	}
}

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []KeyValue
	}{
		{"equals", "a=1\n", []KeyValue{{"a", "1"}}},
		{"colon", "a:1", []KeyValue{{"a", "1"}}},
		{"blank separator", "a 1", []KeyValue{{"a", "1"}}},
		{"spaces around separator", "  a  =  1", []KeyValue{{"a", "1"}}},
		{"second separator is value", "a==1", []KeyValue{{"a", "=1"}}},
		{"comments", "# c\n! c\n  # indented\na=1\n", []KeyValue{{"a", "1"}}},
		{"hash inside value", "a=x#y", []KeyValue{{"a", "x#y"}}},
		{"blank lines", "\n\n  \na=1\n\n", []KeyValue{{"a", "1"}}},
		{"empty value", "a=\nb", []KeyValue{{"a", ""}, {"b", ""}}},
		{"continuation", "a=x,\\\n    y,\\\n  z\nb=2", []KeyValue{{"a", "x,y,z"}, {"b", "2"}}},
		{"escaped backslash is not continuation", "a=x\\\\\nb=2", []KeyValue{{"a", `x\`}, {"b", "2"}}},
		{"continuation at end of file", "a=x\\", []KeyValue{{"a", "x"}}},
		{"crlf", "a=1\r\nb=2\r\n", []KeyValue{{"a", "1"}, {"b", "2"}}},
		{"escapes", `a\=b=x\ty\u0041\:`, []KeyValue{{"a=b", "x\tyA:"}}},
		{"repeated key kept in order", "a=1\na=2", []KeyValue{{"a", "1"}, {"a", "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseProperties(tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseProperties(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A server.properties in the shape Kafka ships for KRaft combined mode loads
// unchanged.
const kafkaSample = `
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093

############################# Socket Server Settings #############################
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Retention Policy #############################
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`

func TestLoadKafkaSample(t *testing.T) {
	b, err := Load(writeFile(t, kafkaSample), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := []Listener{{"PLAINTEXT", "", 9092}, {"CONTROLLER", "", 9093}}; !reflect.DeepEqual(b.Listeners, want) {
		t.Errorf("Listeners = %v, want %v", b.Listeners, want)
	}
	if want := []Listener{{"PLAINTEXT", "localhost", 9092}}; !reflect.DeepEqual(b.AdvertisedListeners, want) {
		t.Errorf("AdvertisedListeners = %v, want %v", b.AdvertisedListeners, want)
	}
	if !reflect.DeepEqual(b.LogDirs, []string{"/tmp/kraft-combined-logs"}) {
		t.Errorf("LogDirs = %v", b.LogDirs)
	}
	if b.OffsetsTopicReplicationFactor != 1 {
		t.Errorf("OffsetsTopicReplicationFactor = %d, want 1", b.OffsetsTopicReplicationFactor)
	}
	voters, err := b.QuorumVoters()
	if err != nil || !reflect.DeepEqual(voters, map[int32]string{1: "localhost:9093"}) {
		t.Errorf("QuorumVoters = %v, %v", voters, err)
	}
	if b.Raw["num.io.threads"] != "8" || b.Raw["log.retention.hours"] != "168" {
		t.Errorf("Raw misses properties as set: %v", b.Raw)
	}
	if _, ok := b.Raw["log.retention.bytes"]; ok {
		t.Errorf("a commented-out property is in Raw")
	}
}

func TestLoadFileSyntaxAndOverrides(t *testing.T) {
	path := writeFile(t, `
# comment
! another comment
num.partitions : 3
log.cleanup.policy = compact,\
                     delete
message.max.bytes 2000
log.retention.ms=1000
auto.create.topics.enable=FALSE
`)
	b, err := Load(path, []string{"num.partitions=7", "log.retention.ms = 5000 ", "node.id=4"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if b.NumPartitions != 7 {
		t.Errorf("NumPartitions = %d, want the override's 7", b.NumPartitions)
	}
	if b.LogRetentionMs != 5000 {
		t.Errorf("LogRetentionMs = %d, want the override's 5000", b.LogRetentionMs)
	}
	if !reflect.DeepEqual(b.LogCleanupPolicy, []string{"compact", "delete"}) {
		t.Errorf("LogCleanupPolicy = %q", b.LogCleanupPolicy)
	}
	if b.MessageMaxBytes != 2000 {
		t.Errorf("MessageMaxBytes = %d", b.MessageMaxBytes)
	}
	if b.AutoCreateTopicsEnable {
		t.Errorf("auto.create.topics.enable=FALSE not honoured")
	}
	if b.NodeID != 4 {
		t.Errorf("NodeID = %d", b.NodeID)
	}
	if b.Raw["num.partitions"] != "7" || b.Raw["log.retention.ms"] != "5000" {
		t.Errorf("Raw = %v, want overrides' values", b.Raw)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.properties"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist", err)
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	path := writeFile(t, `
no.such.property=1
num.partitions=many
message.max.bytes=-5
log.message.timestamp.type=WallClock
listeners=PLAINTEXT//127.0.0.1:9092
log.cleanup.policy=delete,shred
zookeeper.connect=localhost:2181
log.cleaner.min.cleanable.ratio=1.5
num.io.threads=lots
retention.ms=100
=orphan
`)
	_, err := Load(path, []string{"also.unknown=2", "broken-override", "default.replication.factor=40000"})
	if err == nil {
		t.Fatal("Load accepted a broken file")
	}
	msg := err.Error()
	for _, want := range []string{
		"no.such.property", `num.partitions="many"`, `message.max.bytes="-5"`,
		`log.message.timestamp.type="WallClock"`, "listeners=", "shred",
		"zookeeper.connect", "log.cleaner.min.cleanable.ratio", `num.io.threads="lots"`,
		"retention.ms is a topic config", "also.unknown", "broken-override",
		"default.replication.factor", `"orphan" without a property name`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	for _, sentinel := range []error{ErrUnknownProperty, ErrInvalidValue, ErrUnsupported} {
		if !errors.Is(err, sentinel) {
			t.Errorf("error does not wrap %v", sentinel)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != 14 {
		t.Errorf("got %d problems, want 14 (one per offender):\n%s", n, msg)
	}
}

func TestValidateCrossChecks(t *testing.T) {
	tests := []struct {
		name   string
		change func(b *Broker)
		want   string // "" = valid
	}{
		{"default", func(b *Broker) {}, ""},
		{"0.0.0.0 advertised", func(b *Broker) {
			b.Listeners = []Listener{{"PLAINTEXT", "0.0.0.0", 9092}}
			b.AdvertisedListeners = b.Listeners
		}, "non-routable"},
		{"0.0.0.0 bound, real address advertised", func(b *Broker) {
			b.Listeners = []Listener{{"PLAINTEXT", "0.0.0.0", 9092}}
			b.AdvertisedListeners = []Listener{{"PLAINTEXT", "broker1.example", 9092}}
		}, ""},
		{"advertised name not a listener", func(b *Broker) {
			b.AdvertisedListeners = []Listener{{"EXTERNAL", "h", 1}}
		}, "not in listeners"},
		{"duplicate listener names", func(b *Broker) {
			b.Listeners = []Listener{{"PLAINTEXT", "", 1}, {"PLAINTEXT", "", 2}}
		}, "twice"},
		{"same port twice", func(b *Broker) {
			b.Listeners = []Listener{{"PLAINTEXT", "", 9092}, {"CONTROLLER", "", 9092}}
		}, "same address"},
		{"port 0 twice is fine", func(b *Broker) {
			b.Listeners = []Listener{{"PLAINTEXT", "127.0.0.1", 0}, {"CONTROLLER", "127.0.0.1", 0}}
		}, ""},
		{"no listeners", func(b *Broker) { b.Listeners = nil; b.AdvertisedListeners = nil }, "listeners"},
		{"no roles", func(b *Broker) { b.ProcessRoles = nil }, "process.roles"},
		{"bad role", func(b *Broker) { b.ProcessRoles = []string{"broker", "observer"} }, "observer"},
		{"broker alone needs voters", func(b *Broker) { b.ProcessRoles = []string{"broker"} }, "controller.quorum.voters"},
		{"controller not among voters", func(b *Broker) {
			b.ControllerQuorumVoters = "2@h:9093"
			b.Listeners = append(b.Listeners, Listener{"CONTROLLER", "", 9093})
		}, "not in controller.quorum.voters"},
		{"multi-node quorum needs CONTROLLER listener", func(b *Broker) { b.ControllerQuorumVoters = "1@h:9093,2@h:9093" }, "CONTROLLER listener"},
		{"bad voters", func(b *Broker) { b.ControllerQuorumVoters = "1@h" }, "controller.quorum.voters"},
		{"controller-only node with a client listener", func(b *Broker) { b.ProcessRoles = []string{"controller"} }, "process.roles=controller: listener PLAINTEXT"},
		{"broker-only node with a controller listener", func(b *Broker) {
			b.ProcessRoles = []string{"broker"}
			b.ControllerQuorumVoters = "2@h:9093"
			b.Listeners = append(b.Listeners, Listener{"CONTROLLER", "", 9093})
		}, "process.roles=broker: listener CONTROLLER"},
		{"advertised controller listener", func(b *Broker) {
			b.Listeners = append(b.Listeners, Listener{"CONTROLLER", "h", 9093})
			b.AdvertisedListeners = append(b.AdvertisedListeners, Listener{"CONTROLLER", "h", 9093})
		}, "advertised.listeners names the controller listener"},
		{"inter-broker listener not advertised", func(b *Broker) { b.InterBrokerListenerName = "REPLICATION" }, "inter.broker.listener.name=REPLICATION"},
		{"heartbeat slower than the session", func(b *Broker) { b.BrokerHeartbeatIntervalMs = 9000 }, "broker.heartbeat.interval.ms"},
		{"group timeouts crossed", func(b *Broker) { b.GroupMinSessionTimeoutMs = 10; b.GroupMaxSessionTimeoutMs = 5 }, "group.min.session.timeout.ms"},
		{"retention zero", func(b *Broker) { b.LogRetentionMs = 0 }, "log.retention.ms"},
		{"compaction lags crossed", func(b *Broker) { b.LogCleanerMinCompactionLagMs = 10; b.LogCleanerMaxCompactionLagMs = 5 }, "log.cleaner.min.compaction.lag.ms"},
		{"field out of bounds", func(b *Broker) { b.LogSegmentBytes = 10 }, "log.segment.bytes"},
		{"segment above int32", func(b *Broker) { b.LogSegmentBytes = 1 << 31 }, "log.segment.bytes"},
		{"duplicate log dirs", func(b *Broker) { b.LogDirs = []string{"/a", "/a"} }, "log.dirs"},
		{"no log dirs", func(b *Broker) { b.LogDirs = nil }, "log.dirs"},
		{"bad metrics listener", func(b *Broker) { b.MetricsListener = "nope" }, "metrics.listener"},
		{"bad console listener", func(b *Broker) { b.ConsoleListener = "nope" }, "console.listener"},
		{"bad timestamp type", func(b *Broker) { b.LogMessageTimestampType = "createtime" }, "log.message.timestamp.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Default()
			tt.change(b)
			err := b.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error mentioning %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate() = %v, want it to mention %q", err, tt.want)
			case err != nil && !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrInvalidValue):
				t.Fatalf("Validate() = %v wraps no sentinel", err)
			}
		})
	}
}

func TestValidateReportsAllAtOnce(t *testing.T) {
	b := Default()
	b.NumPartitions = 0
	b.MessageMaxBytes = -1
	b.GroupMinSessionTimeoutMs, b.GroupMaxSessionTimeoutMs = 10, 5
	err := b.Validate()
	for _, want := range []string{"num.partitions", "message.max.bytes", "group.min.session.timeout.ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %s", err, want)
		}
	}
}

func TestLoadListenersDefaults(t *testing.T) {
	tests := []struct {
		name       string
		overrides  []string
		advertised []Listener
		wantErr    string
	}{
		{"controller listener is not advertised",
			[]string{"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"},
			[]Listener{{"PLAINTEXT", "127.0.0.1", 0}}, ""},
		{"lower-case names are normalised",
			[]string{"listeners=plaintext://[::1]:9092"},
			[]Listener{{"PLAINTEXT", "::1", 9092}}, ""},
		{"0.0.0.0 without advertised.listeners",
			[]string{"listeners=PLAINTEXT://0.0.0.0:9092"}, nil, "advertised"},
		{"0.0.0.0 with advertised.listeners",
			[]string{"listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners=PLAINTEXT://b1:9092"},
			[]Listener{{"PLAINTEXT", "b1", 9092}}, ""},
		{"bad port", []string{"listeners=PLAINTEXT://h:70000"}, nil, "listeners"},
		{"no scheme", []string{"listeners=h:9092"}, nil, "listeners"},
		{"broker.id used when node.id unset", []string{"broker.id=7"}, nil, ""},
		{"broker.id conflicts with node.id", []string{"broker.id=7", "node.id=8"}, nil, "broker.id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load("", tt.overrides)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v, want error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.advertised != nil && !reflect.DeepEqual(b.AdvertisedListeners, tt.advertised) {
				t.Errorf("AdvertisedListeners = %v, want %v", b.AdvertisedListeners, tt.advertised)
			}
			if tt.name == "broker.id used when node.id unset" && b.NodeID != 7 {
				t.Errorf("NodeID = %d, want 7", b.NodeID)
			}
		})
	}
}

func TestListenerAddr(t *testing.T) {
	ls, err := ParseListeners("PLAINTEXT://[::1]:9092, CONTROLLER://:0")
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{ls[0].Addr(), ls[0].String(), ls[1].Addr(), ls[1].String()}; !reflect.DeepEqual(got,
		[]string{"[::1]:9092", "PLAINTEXT://[::1]:9092", ":0", "CONTROLLER://:0"}) {
		t.Errorf("got %q", got)
	}
}

func TestParseQuorumVoters(t *testing.T) {
	tests := []struct {
		in      string
		want    map[int32]string
		wantErr bool
	}{
		{"", map[int32]string{}, false},
		{"1@localhost:9093", map[int32]string{1: "localhost:9093"}, false},
		{"1@a:1, 2@[::1]:2 ,3@c:3", map[int32]string{1: "a:1", 2: "[::1]:2", 3: "c:3"}, false},
		{"1@a", nil, true},
		{"a:1", nil, true},
		{"x@a:1", nil, true},
		{"-1@a:1", nil, true},
		{"1@a:1,1@b:2", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseQuorumVoters(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("ParseQuorumVoters(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func FuzzParseProperties(f *testing.F) {
	f.Add(kafkaSample)
	f.Add("a\\\n=\\u12\\")
	f.Fuzz(func(t *testing.T, text string) {
		for _, kv := range ParseProperties(text) {
			_ = ValidateTopicConfig(kv.Key, kv.Value)
		}
	})
}

func TestInternalTopicsFitASingleNode(t *testing.T) {
	b, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.OffsetsTopicRF() != 1 || b.TransactionStateRF() != 1 || b.TransactionStateMinISR() != 1 {
		t.Fatalf("single node: %d %d %d", b.OffsetsTopicRF(), b.TransactionStateRF(), b.TransactionStateMinISR())
	}
	b, err = Load("", []string{"controller.quorum.voters=1@127.0.0.1:9093", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"})
	if err != nil {
		t.Fatal(err)
	}
	if b.OffsetsTopicRF() != 3 || b.TransactionStateRF() != 3 || b.TransactionStateMinISR() != 2 {
		t.Fatalf("with voters: %d %d %d", b.OffsetsTopicRF(), b.TransactionStateRF(), b.TransactionStateMinISR())
	}
	b, err = Load("", []string{"offsets.topic.replication.factor=2"})
	if err != nil || b.OffsetsTopicRF() != 2 {
		t.Fatalf("explicit: %v %d", err, b.OffsetsTopicRF())
	}
	if b.InterBrokerListenerName != "PLAINTEXT" || len(b.ClientListeners()) != 1 {
		t.Fatalf("listeners: %q %v", b.InterBrokerListenerName, b.ClientListeners())
	}
}

func TestReplicaSelectorClass(t *testing.T) {
	for _, v := range []string{LeaderSelector, RackAwareReplicaSelector} {
		b, err := Load("", []string{"replica.selector.class=" + v})
		if err != nil || b.ReplicaSelectorClass != v {
			t.Fatalf("replica.selector.class=%s: %v, field %q", v, err, b.ReplicaSelectorClass)
		}
	}
	_, err := Load("", []string{"replica.selector.class=com.example.MySelector"})
	if err == nil || !strings.Contains(err.Error(), "replica.selector.class") || !strings.Contains(err.Error(), RackAwareReplicaSelector) {
		t.Fatalf("a custom selector class: %v, want a refusal naming the property and the supported classes", err)
	}
}

// group.coordinator.rebalance.protocols: Kafka's values are accepted, classic cannot
// be left out, and leaving consumer out turns the consumer protocol off.
func TestRebalanceProtocols(t *testing.T) {
	b, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !b.ConsumerProtocolEnabled() || strings.Join(b.GroupCoordinatorRebalanceProtocols, ",") != "classic,consumer,streams" {
		t.Errorf("default = %v, want classic,consumer,streams with consumer on", b.GroupCoordinatorRebalanceProtocols)
	}
	for _, v := range []string{"classic", "classic,share", "classic,consumer,share,streams"} {
		b, err := Load("", []string{"group.coordinator.rebalance.protocols=" + v})
		if err != nil {
			t.Errorf("%s: %v", v, err)
			continue
		}
		if got, want := b.ConsumerProtocolEnabled(), strings.Contains(v, "consumer"); got != want {
			t.Errorf("%s: ConsumerProtocolEnabled = %v, want %v", v, got, want)
		}
	}
	for v, sentinel := range map[string]error{
		"consumer":       ErrInvalidConfig,
		"consumer,share": ErrInvalidConfig,
		"classic,eager":  ErrInvalidValue,
		"":               ErrInvalidValue,
	} {
		_, err := Load("", []string{"group.coordinator.rebalance.protocols=" + v})
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), "group.coordinator.rebalance.protocols") {
			t.Errorf("%q: err = %v, want %v naming the property", v, err, sentinel)
		}
	}
}

// Kafka 4 coordinator and buffer properties that change nothing in Samsa load at
// Kafka's defaults and are reported as ignored; the ones guarding data or access
// that Samsa cannot honour are refused, each with what Samsa does instead.
func TestKafka4PropertiesAcceptedOrRefused(t *testing.T) {
	accepted := []string{
		"group.coordinator.threads=4", "group.coordinator.append.linger.ms=5",
		"offsets.load.buffer.size=5242880", "offsets.topic.compression.codec=0",
		"transaction.state.log.load.buffer.size=5242880", "share.coordinator.threads=1",
		"share.coordinator.load.buffer.size=5242880", "share.coordinator.append.linger.ms=10",
		"share.coordinator.state.topic.compression.codec=0", "socket.listen.backlog.size=50",
		"fetch.purgatory.purge.interval.requests=1000", "producer.purgatory.purge.interval.requests=1000",
		"delete.records.purgatory.purge.interval.requests=1", "eligible.leader.replicas.enable=false",
	}
	b, err := Load("", accepted)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, kv := range accepted {
		name, value, _ := strings.Cut(kv, "=")
		if p := brokerIndex[name]; p == nil || !p.ignored {
			t.Errorf("%s is not an ignored property", name)
		}
		if b.Raw[name] != value {
			t.Errorf("Raw[%s] = %q, want %q", name, b.Raw[name], value)
		}
	}

	refused := map[string]struct {
		sentinel error
		why      string
	}{
		"eligible.leader.replicas.enable=true": {ErrInvalidValue, "elects leaders from the ISR only"},
		"create.topic.policy.class.name=x.Y":   {ErrUnsupported, "ACLs"},
		"alter.config.policy.class.name=x.Y":   {ErrUnsupported, "ACLs"},
		"offsets.topic.compression.codec=9":    {ErrInvalidValue, "offsets.topic.compression.codec"},
		"group.coordinator.threads=0":          {ErrInvalidValue, "group.coordinator.threads"},
	}
	for kv, want := range refused {
		_, err := Load("", []string{kv})
		name, _, _ := strings.Cut(kv, "=")
		if !errors.Is(err, want.sentinel) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want.why) {
			t.Errorf("%s: err = %v, want %v naming it and saying %q", kv, err, want.sentinel, want.why)
		}
	}
}
