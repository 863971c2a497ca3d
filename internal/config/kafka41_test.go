package config

import (
	"errors"
	"strings"
	"testing"
)

// kafka41Defaults are the Kafka 4.1 broker and controller properties Samsa used to
// refuse as unknown, each at Kafka's default (from the ConfigDef definitions of
// ServerConfigs, ReplicationConfigs, KRaftConfigs, MetadataLogConfig, QuorumConfig,
// QuotaConfig, ServerLogConfigs, SocketServerConfigs, GroupCoordinatorConfig,
// ShareGroupConfig, ShareCoordinatorConfig, DelegationTokenManagerConfigs,
// MetricConfigs), plus properties removed in Kafka 4 that 3.x files still carry.
var kafka41Defaults = []string{
	"controlled.shutdown.enable=true", "controlled.shutdown.max.retries=3", "controlled.shutdown.retry.backoff.ms=5000",
	"replica.high.watermark.checkpoint.interval.ms=5000",
	"log.flush.offset.checkpoint.interval.ms=60000", "log.flush.start.offset.checkpoint.interval.ms=60000",
	"log.initial.task.delay.ms=30000", "log.dir.failure.timeout.ms=30000",
	"log.message.format.version=3.0-IV1", "log.message.downconversion.enable=true",
	"producer.id.expiration.check.interval.ms=600000",
	"metadata.log.segment.bytes=1073741824", "metadata.log.segment.min.bytes=8388608", "metadata.log.segment.ms=604800000",
	"metadata.log.max.record.bytes.between.snapshots=20971520", "metadata.log.max.snapshot.interval.ms=3600000",
	"metadata.max.retention.bytes=104857600", "metadata.max.retention.ms=604800000", "metadata.max.idle.interval.ms=500",
	"controller.quorum.append.linger.ms=25", "controller.quorum.election.backoff.max.ms=1000",
	"initial.broker.registration.timeout.ms=60000", "unclean.leader.election.interval.ms=300000",
	"server.max.startup.time.ms=9223372036854775807", "controller.socket.timeout.ms=30000",
	"broker.id.generation.enable=true", "reserved.broker.max.id=1000", "inter.broker.protocol.version=3.9-IV0",
	"early.start.listeners=CONTROLLER", "request.timeout.ms=30000",
	"socket.connection.setup.timeout.ms=10000", "socket.connection.setup.timeout.max.ms=30000",
	"replica.socket.receive.buffer.bytes=65536", "queued.max.request.bytes=-1", "max.request.partition.size.limit=2000",
	"num.replica.alter.log.dirs.threads=1",
	"quota.window.num=11", "quota.window.size.seconds=1",
	"controller.quota.window.num=11", "controller.quota.window.size.seconds=1",
	"replication.quota.window.num=11", "replication.quota.window.size.seconds=1",
	"alter.log.dirs.replication.quota.window.num=11", "alter.log.dirs.replication.quota.window.size.seconds=1",
	"delegation.token.max.lifetime.ms=604800000", "delegation.token.expiry.time.ms=86400000",
	"delegation.token.expiry.check.interval.ms=3600000",
	"metric.reporters=org.apache.kafka.common.metrics.JmxReporter", "metrics.num.samples=2", "metrics.sample.window.ms=30000",
	"metrics.recording.level=INFO", "kafka.metrics.reporters=", "kafka.metrics.polling.interval.secs=10",
	"telemetry.max.bytes=1048576", "unstable.api.versions.enable=false", "unstable.feature.versions.enable=false",
	"group.coordinator.new.enable=true", "group.share.enable=false", "group.share.max.groups=10",
	"group.share.record.lock.duration.ms=30000", "group.share.min.record.lock.duration.ms=15000",
	"group.share.max.record.lock.duration.ms=60000",
	"share.fetch.purgatory.purge.interval.requests=1000", "share.fetch.max.fetch.records=2147483647",
	"share.coordinator.snapshot.update.records.per.snapshot=500", "share.coordinator.write.timeout.ms=5000",
	"group.share.persister.class.name=org.apache.kafka.server.share.persister.DefaultStatePersister",
	"max.connection.creation.rate=2147483647",
}

// TestKafka41PropertiesLoad: every property of kafka41Defaults loads at Kafka's
// default, alone and all together.
func TestKafka41PropertiesLoad(t *testing.T) {
	for _, kv := range kafka41Defaults {
		if _, err := Load("", []string{kv}); err != nil {
			t.Errorf("%s: %v", kv, err)
		}
	}
	b, err := Load("", kafka41Defaults)
	if err != nil {
		t.Fatalf("all together: %v", err)
	}
	for _, kv := range kafka41Defaults {
		name, value, _ := strings.Cut(kv, "=")
		if b.Raw[name] != value {
			t.Errorf("Raw[%s] = %q, want %q", name, b.Raw[name], value)
		}
	}
}

// TestKafka41PropertiesRefused: values Samsa cannot honour, and Kafka properties
// whose mechanism Samsa lacks where accepting them would leave a protection or a
// plugin silently missing, are refused naming the property and saying what Samsa
// does instead; out-of-range values are refused as Kafka's validators refuse them.
func TestKafka41PropertiesRefused(t *testing.T) {
	refused := []struct {
		overrides []string
		sentinel  error
		want      string
	}{
		{[]string{"client.quota.callback.class=x.Y"}, ErrUnsupported, "client.quota.callback.class: Samsa runs no quota callback plugins"},
		{[]string{"leader.replication.throttled.rate=1000"}, ErrUnsupported, "leader.replication.throttled.rate: Samsa does not throttle replication"},
		{[]string{"follower.replication.throttled.rate=1000"}, ErrUnsupported, "follower.replication.throttled.rate: Samsa does not throttle replication"},
		{[]string{"replica.alter.log.dirs.io.max.bytes.per.second=1000"}, ErrUnsupported, "replica.alter.log.dirs.io.max.bytes.per.second: Samsa does not throttle"},
		{[]string{"max.connection.creation.rate=0"}, ErrInvalidValue, "max.connection.creation.rate"},
		{[]string{"group.share.persister.class.name=com.example.Persister"}, ErrInvalidValue, "__share_group_state"},
		{[]string{"log.dirs=/data/a,/data/b", "metadata.log.dir=/data/meta"}, ErrInvalidConfig, "metadata.log.dir=/data/meta is not the first of log.dirs (/data/a)"},
		{[]string{"controlled.shutdown.enable=maybe"}, ErrInvalidValue, "controlled.shutdown.enable"},
		{[]string{"controller.quota.window.num=0"}, ErrInvalidValue, "controller.quota.window.num"},
		{[]string{"controller.quota.window.size.seconds=0"}, ErrInvalidValue, "controller.quota.window.size.seconds"},
		{[]string{"group.share.max.groups=101"}, ErrInvalidValue, "group.share.max.groups"},
		{[]string{"group.share.min.record.lock.duration.ms=40000"}, ErrInvalidValue, "group.share.min.record.lock.duration.ms"},
		{[]string{"group.share.max.record.lock.duration.ms=20000"}, ErrInvalidValue, "group.share.max.record.lock.duration.ms"},
		{[]string{"group.share.record.lock.duration.ms=3600001"}, ErrInvalidValue, "group.share.record.lock.duration.ms"},
		{[]string{"group.share.record.lock.duration.ms=10000"}, ErrInvalidConfig,
			"group.share.record.lock.duration.ms=10000 is outside [group.share.min.record.lock.duration.ms=15000, group.share.max.record.lock.duration.ms=60000]"},
		{[]string{"group.share.max.record.lock.duration.ms=40000", "group.share.record.lock.duration.ms=50000"}, ErrInvalidConfig,
			"group.share.record.lock.duration.ms=50000 is outside"},
	}
	for _, c := range refused {
		_, err := Load("", c.overrides)
		if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %v containing %q", c.overrides, err, c.sentinel, c.want)
		}
	}
}

// TestKafka41PropertiesTakeEffect: the properties Samsa implements reach the fields
// the broker reads.
func TestKafka41PropertiesTakeEffect(t *testing.T) {
	b, err := Load("", []string{
		"controlled.shutdown.enable=false",
		"controller.quota.window.num=3", "controller.quota.window.size.seconds=2",
		"group.share.min.record.lock.duration.ms=5000", "group.share.max.record.lock.duration.ms=120000",
		"group.share.record.lock.duration.ms=100000",
		"log.dirs=/data/a,/data/b", "metadata.log.dir=/data/a/",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.ControlledShutdownEnable {
		t.Error("controlled.shutdown.enable=false left ControlledShutdownEnable true")
	}
	if b.Security.ControllerQuotaWindowNum != 3 || b.Security.ControllerQuotaWindowSizeSeconds != 2 {
		t.Errorf("controller quota window = %d × %d s, want 3 × 2 s", b.Security.ControllerQuotaWindowNum, b.Security.ControllerQuotaWindowSizeSeconds)
	}
	if err := ValidateGroupConfigs(b, map[string]string{"share.record.lock.duration.ms": "110000"}, []string{"share.record.lock.duration.ms"}); err != nil {
		t.Errorf("share.record.lock.duration.ms within the raised bound: %v", err)
	}
	if got := GroupInt(b, map[string]string{"share.record.lock.duration.ms": "1000"}, "share.record.lock.duration.ms"); got != 5000 {
		t.Errorf("a stored lock duration below the bound counts as %d, want 5000", got)
	}
	if d := Default(); !d.ControlledShutdownEnable || d.Security.ControllerQuotaWindowNum != 11 || d.Security.ControllerQuotaWindowSizeSeconds != 1 {
		t.Errorf("defaults: controlled shutdown %v, controller quota window %d × %d s; want true, 11 × 1 s",
			d.ControlledShutdownEnable, d.Security.ControllerQuotaWindowNum, d.Security.ControllerQuotaWindowSizeSeconds)
	}
}
