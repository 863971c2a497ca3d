#!/usr/bin/python3
"""Conformance driver for confluent-kafka-python (librdkafka), Debian's
python3-confluent-kafka. Run with /usr/bin/python3.

Commands: codecs, metadata, create, produce, transact, consume, member, configs (see
common.py).
"""

import signal
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import common

CLIENT = "confluent-kafka"


def base_conf(args):
    conf = {"bootstrap.servers": args.bootstrap, "broker.address.family": "v4",
            "client.id": "samsa-conformance-confluent"}
    conf.update(common.librdkafka_security(args))
    return conf


def cmd_codecs(args):
    # librdkafka as packaged by Debian is built with every codec.
    return {"client": CLIENT, "codecs": ["none", "gzip", "snappy", "lz4", "zstd"],
            "version": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0]}


def cmd_metadata(args):
    admin = AdminClient(base_conf(args))
    md = admin.list_topics(timeout=max(1.0, args.timeout - 5))
    brokers = [{"id": b.id, "host": b.host, "port": b.port} for b in md.brokers.values()]
    topics = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
    return {"client": CLIENT, "brokers": brokers, "topics": topics,
            "controller": md.controller_id, "cluster_id": md.cluster_id}


def cmd_create(args):
    admin = AdminClient(base_conf(args))
    fs = admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions,
                                       replication_factor=1)],
                             operation_timeout=10)
    for _, f in fs.items():
        f.result(timeout=max(1.0, args.timeout - 5))
    return {"client": CLIENT, "created": args.topic}


def cmd_produce(args):
    conf = base_conf(args)
    conf.update({"compression.type": args.codec, "enable.idempotence": True,
                 "linger.ms": 20, "acks": "all"})
    p = Producer(conf)
    acks = []
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
            return
        acks.append({"key": msg.key().decode(), "value": msg.value().decode(),
                     "partition": msg.partition(), "offset": msg.offset()})

    n = 0
    for key, value, seq in common.generate(args.tag, args.keys, args.per_key):
        p.produce(args.topic, key=key.encode(), value=value.encode(),
                  headers=[("seq", str(seq).encode())], on_delivery=delivered)
        p.poll(0)
        n += 1
    remaining = p.flush(max(1.0, args.timeout - 5))
    if remaining:
        errors.append("%d records still undelivered after flush" % remaining)
    if errors:
        raise RuntimeError("; ".join(errors[:5]))
    return {"client": CLIENT, "produced": n, "codec": args.codec, "acks": acks}


def cmd_transact(args):
    conf = base_conf(args)
    conf.update({"transactional.id": args.txn_id or "samsa-conformance-confluent",
                 "transaction.timeout.ms": 30000, "linger.ms": 5})
    p = Producer(conf)
    timeout = max(1.0, args.timeout - 10)
    p.init_transactions(timeout)
    committed = aborted = 0
    seq = -1
    for key, value, s in common.generate(args.tag, args.keys, args.per_key):
        if s != seq:
            if seq >= 0:
                committed, aborted = end_round(p, seq, args.keys, committed, aborted, timeout)
            p.begin_transaction()
            seq = s
        p.produce(args.topic, key=key.encode(), value=value.encode(), headers=[("seq", str(s).encode())])
        p.poll(0)
    if seq >= 0:
        committed, aborted = end_round(p, seq, args.keys, committed, aborted, timeout)
    return {"client": CLIENT, "produced": committed, "aborted": aborted}


def end_round(p, seq, keys, committed, aborted, timeout):
    if common.txn_commits(seq):
        p.commit_transaction(timeout)
        return committed + keys, aborted
    p.flush(timeout)
    p.abort_transaction(timeout)
    return committed, aborted + keys


def decode_headers(msg):
    return {k: (v.decode() if v is not None else None) for k, v in (msg.headers() or [])}


def record_of(msg):
    return {"partition": msg.partition(), "offset": msg.offset(),
            "key": msg.key().decode() if msg.key() is not None else None,
            "value": msg.value().decode() if msg.value() is not None else None,
            "headers": decode_headers(msg)}


def cmd_consume(args):
    conf = base_conf(args)
    # A group id is mandatory for this client, but with assign() it never joins.
    conf.update({"group.id": "samsa-conformance-assign", "enable.auto.commit": False,
                 "enable.partition.eof": True, "check.crcs": True,
                 "isolation.level": args.isolation})
    c = Consumer(conf)
    md = c.list_topics(args.topic, timeout=10)
    parts = sorted(md.topics[args.topic].partitions.keys())
    c.assign([TopicPartition(args.topic, p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
    pending_eof = set(parts)
    records = []
    deadline = time.monotonic() + args.timeout - 5
    while pending_eof and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                pending_eof.discard(msg.partition())
                continue
            raise RuntimeError(str(msg.error()))
        records.append(record_of(msg))
    c.close()
    return {"client": CLIENT, "records": records,
            "incomplete_partitions": sorted(pending_eof)}


def cmd_member(args):
    """A long-running group member printing one JSON event per line.

    Events: ready, assigned/revoked/lost (partition deltas), record, commit, error,
    closed. SIGTERM closes the consumer cleanly; the Go test uses SIGKILL to crash it.
    """
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(True))
    signal.alarm(0)  # members live until the test stops them; the test owns the deadline
    conf = base_conf(args)
    conf.update({"group.id": args.group, "enable.auto.commit": False,
                 "auto.offset.reset": "earliest",
                 "session.timeout.ms": args.session_timeout_ms,
                 "heartbeat.interval.ms": args.heartbeat_interval_ms})
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.assignor:
        conf["partition.assignment.strategy"] = args.assignor
    if args.max_poll_interval_ms:
        conf["max.poll.interval.ms"] = args.max_poll_interval_ms
    c = Consumer(conf)

    def on_assign(consumer, parts):
        common.emit({"ev": "assigned", "partitions": sorted(p.partition for p in parts)})

    def on_revoke(consumer, parts):
        common.emit({"ev": "revoked", "partitions": sorted(p.partition for p in parts)})

    def on_lost(consumer, parts):
        common.emit({"ev": "lost", "partitions": sorted(p.partition for p in parts)})

    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    common.emit({"ev": "ready"})
    batch = args.max_poll_records or 100
    while not stop:
        msgs = c.consume(num_messages=batch, timeout=0.2)
        if not msgs:
            continue
        done = {}
        for msg in msgs:
            if msg.error():
                common.emit({"ev": "error", "msg": str(msg.error())})
                continue
            common.emit(dict(record_of(msg), ev="record"))
            if args.process_delay_ms:
                time.sleep(args.process_delay_ms / 1000.0)
            done[msg.partition()] = msg.offset() + 1
        if args.commit and done:
            try:
                c.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in done.items()],
                         asynchronous=False)
                common.emit({"ev": "commit",
                             "offsets": {str(p): o for p, o in sorted(done.items())}})
            except Exception as e:
                common.emit({"ev": "error", "msg": "commit: %s" % e})
    c.close()
    common.emit({"ev": "closed"})
    return None


def source_name(source):
    """A ConfigEntry's source: a ConfigSource, or its id (synonyms, in 1.7)."""
    return source.name if hasattr(source, "name") else common.CONFIG_SOURCES[source]


def cmd_configs(args):
    """Describes the topic's and the broker's configs (librdkafka asks for synonyms)."""
    admin = AdminClient(base_conf(args))
    out = {}
    for kind, name in (("topic", args.topic), ("broker", args.broker_id)):
        res = ConfigResource(kind, name)
        configs = admin.describe_configs([res])[res].result(timeout=max(1.0, args.timeout - 5))
        out[kind] = {n: common.config_entry(e.value, source_name(e.source), e.is_sensitive,
                                            [(source_name(s.source), s.name, s.value) for s in e.synonyms.values()])
                     for n, e in configs.items()}
    return {"client": CLIENT, "configs": out}


if __name__ == "__main__":
    common.run("confluent-kafka conformance driver", {
        "codecs": cmd_codecs,
        "metadata": cmd_metadata,
        "create": cmd_create,
        "produce": cmd_produce,
        "transact": cmd_transact,
        "consume": cmd_consume,
        "member": cmd_member,
        "configs": cmd_configs,
    })
