#!/usr/bin/python3
"""Conformance driver for kafka-python, Debian's python3-kafka. Run with
/usr/bin/python3.

Commands: codecs, metadata, create, produce, consume, member, configs (see common.py).
kafka-python compresses with gzip always, and with snappy, lz4 and zstd only when
their Python modules are importable; "codecs" reports what is usable here.
kafka-python (2.0.x) has neither static membership nor cooperative rebalancing.
"""

import logging
import signal
import time

import kafka
import kafka.codec
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata

import common

CLIENT = "kafka-python"

logging.basicConfig(level=logging.CRITICAL)


def cmd_codecs(args):
    codecs = ["none"]
    for name, have in (("gzip", kafka.codec.has_gzip), ("snappy", kafka.codec.has_snappy),
                       ("lz4", kafka.codec.has_lz4), ("zstd", kafka.codec.has_zstd)):
        if have():
            codecs.append(name)
    return {"client": CLIENT, "codecs": codecs, "version": kafka.__version__}


def cmd_metadata(args):
    c = KafkaConsumer(bootstrap_servers=args.bootstrap, **common.kafka_python_security(args), group_id=None,
                      client_id="samsa-conformance-kafka-python")
    names = c.topics()  # forces a full metadata refresh
    cluster = c._client.cluster
    # Before the first metadata answer, kafka-python lists its bootstrap
    # pseudo-broker ("bootstrap-0"); only brokers the cluster reported count.
    brokers = [{"id": b.nodeId, "host": b.host, "port": b.port} for b in cluster.brokers()
               if isinstance(b.nodeId, int)]
    topics = {t: len(c.partitions_for_topic(t) or ()) for t in names}
    version = c.config.get("api_version")
    c.close()
    return {"client": CLIENT, "brokers": brokers, "topics": topics,
            "controller": cluster.controller.nodeId if cluster.controller else None,
            "inferred_broker_version": ".".join(map(str, version)) if version else None}


def cmd_create(args):
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, **common.kafka_python_security(args),
                             client_id="samsa-conformance-kafka-python")
    admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions,
                                  replication_factor=1)], timeout_ms=10000)
    admin.close()
    return {"client": CLIENT, "created": args.topic}


def cmd_produce(args):
    p = KafkaProducer(bootstrap_servers=args.bootstrap, **common.kafka_python_security(args), acks="all", linger_ms=20,
                      compression_type=None if args.codec == "none" else args.codec,
                      client_id="samsa-conformance-kafka-python", retries=5)
    futures = []
    for key, value, seq in common.generate(args.tag, args.keys, args.per_key):
        f = p.send(args.topic, key=key.encode(), value=value.encode(),
                   headers=[("seq", str(seq).encode())])
        futures.append((key, value, f))
    p.flush(timeout=max(1.0, args.timeout - 5))
    acks = []
    for key, value, f in futures:
        md = f.get(timeout=5)
        acks.append({"key": key, "value": value, "partition": md.partition,
                     "offset": md.offset})
    p.close(timeout=5)
    return {"client": CLIENT, "produced": len(acks), "codec": args.codec, "acks": acks}


def record_of(msg):
    return {"partition": msg.partition, "offset": msg.offset,
            "key": msg.key.decode() if msg.key is not None else None,
            "value": msg.value.decode() if msg.value is not None else None,
            "headers": {k: (v.decode() if v is not None else None)
                        for k, v in (msg.headers or [])}}


def cmd_consume(args):
    c = KafkaConsumer(bootstrap_servers=args.bootstrap, **common.kafka_python_security(args), group_id=None,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      check_crcs=True, client_id="samsa-conformance-kafka-python")
    # A topic created a moment ago may not be in every metadata answer yet.
    ids = None
    deadline = time.monotonic() + 10
    while not ids and time.monotonic() < deadline:
        ids = c.partitions_for_topic(args.topic)
        if not ids:
            time.sleep(0.2)
    parts = [TopicPartition(args.topic, p) for p in sorted(ids or ())]
    if not parts:
        raise RuntimeError("no partitions for topic %s" % args.topic)
    c.assign(parts)
    c.seek_to_beginning(*parts)
    end = c.end_offsets(parts)
    records = []
    deadline = time.monotonic() + args.timeout - 5
    pending = {tp for tp in parts if c.position(tp) < end[tp]}
    while pending and time.monotonic() < deadline:
        batches = c.poll(timeout_ms=200)
        for tp, msgs in batches.items():
            for msg in msgs:
                records.append(record_of(msg))
        pending = {tp for tp in pending if c.position(tp) < end[tp]}
    c.close()
    return {"client": CLIENT, "records": records,
            "incomplete_partitions": sorted(tp.partition for tp in pending),
            "end_offsets": {str(tp.partition): o for tp, o in end.items()}}


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        common.emit({"ev": "revoked", "partitions": sorted(tp.partition for tp in revoked)})

    def on_partitions_assigned(self, assigned):
        common.emit({"ev": "assigned", "partitions": sorted(tp.partition for tp in assigned)})


def cmd_member(args):
    """Long-running group member; see confluent.py for the event protocol."""
    if args.instance_id:
        raise RuntimeError("kafka-python has no static membership (group.instance.id)")
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(True))
    signal.alarm(0)
    assignors = {"": [RangePartitionAssignor, RoundRobinPartitionAssignor],
                 "range": [RangePartitionAssignor],
                 "roundrobin": [RoundRobinPartitionAssignor]}
    if args.assignor not in assignors:
        raise RuntimeError("kafka-python has no assignor %r" % args.assignor)
    conf = dict(bootstrap_servers=args.bootstrap, **common.kafka_python_security(args), group_id=args.group,
                enable_auto_commit=False, auto_offset_reset="earliest",
                session_timeout_ms=args.session_timeout_ms,
                heartbeat_interval_ms=args.heartbeat_interval_ms,
                partition_assignment_strategy=assignors[args.assignor],
                client_id="samsa-conformance-kafka-python")
    if args.max_poll_interval_ms:
        conf["max_poll_interval_ms"] = args.max_poll_interval_ms
    if args.max_poll_records:
        conf["max_poll_records"] = args.max_poll_records
    c = KafkaConsumer(**conf)
    c.subscribe([args.topic], listener=Listener())
    common.emit({"ev": "ready"})
    while not stop:
        batches = c.poll(timeout_ms=200)
        done = {}
        for tp, msgs in batches.items():
            for msg in msgs:
                common.emit(dict(record_of(msg), ev="record"))
                if args.process_delay_ms:
                    time.sleep(args.process_delay_ms / 1000.0)
                done[tp] = msg.offset + 1
        if args.commit and done:
            try:
                c.commit({tp: OffsetAndMetadata(o, "") for tp, o in done.items()})
                common.emit({"ev": "commit",
                             "offsets": {str(tp.partition): o for tp, o in done.items()}})
            except Exception as e:
                common.emit({"ev": "error", "msg": "commit: %s" % e})
    c.close()
    common.emit({"ev": "closed"})
    return None


def cmd_configs(args):
    """Describes the topic's and the broker's configs with synonyms."""
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, **common.kafka_python_security(args),
                             client_id="samsa-conformance-kafka-python")
    out = {}
    for kind, rtype, name in (("topic", ConfigResourceType.TOPIC, args.topic),
                              ("broker", ConfigResourceType.BROKER, args.broker_id)):
        for resp in admin.describe_configs([ConfigResource(rtype, name)], include_synonyms=True):
            for err, msg, _, _, entries in resp.resources:
                if err:
                    raise RuntimeError("describe %s %s: error %d %s" % (kind, name, err, msg))
                out[kind] = {e[0]: common.config_entry(e[1], common.CONFIG_SOURCES[e[3]], e[4],
                                                       [(common.CONFIG_SOURCES[s[2]], s[0], s[1]) for s in e[5]])
                             for e in entries}
    admin.close()
    return {"client": CLIENT, "configs": out}


if __name__ == "__main__":
    common.run("kafka-python conformance driver", {
        "codecs": cmd_codecs,
        "metadata": cmd_metadata,
        "create": cmd_create,
        "produce": cmd_produce,
        "consume": cmd_consume,
        "member": cmd_member,
        "configs": cmd_configs,
    })
