"""Shared plumbing for the Python conformance drivers (kcat.py, kafka_python.py,
confluent.py). Standard library only, so it runs under /usr/bin/python3.

Every driver is a command-line program:

    DRIVER COMMAND --bootstrap 127.0.0.1:PORT [options]

and prints exactly one JSON object on the last line of stdout (the summary the Go
test parses). Long-running group members (command "member") instead print one JSON
event per line. A driver never runs longer than --timeout seconds: an alarm kills it.

Records are generated identically by every driver (and by kafkajs.js and the Go
test) so that one client can produce and another verify:

    key    = "k<i>"                        i in [0, keys)
    value  = "<tag>|k<i>|<seq>|" + "samsa-" * (1 + seq % 7)
    header "seq" = "<seq>"                 (drivers that can set per-record headers)

produced in the order: for seq in [0, per_key): for i in [0, keys).

Command "transact" produces the same records with a transactional producer, one
transaction per round seq, committed unless txn_commits(seq) is false (aborted);
"consume --isolation read_committed" then sees the committed rounds only.
"""

import argparse
import json
import os
import signal
import sys


def record_value(tag, key, seq):
    return "%s|%s|%d|%s" % (tag, key, seq, "samsa-" * (1 + seq % 7))


def generate(tag, keys, per_key):
    """Yields (key, value, seq) in production order."""
    for seq in range(per_key):
        for i in range(keys):
            key = "k%d" % i
            yield key, record_value(tag, key, seq), seq


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("command")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", default="")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--codec", default="none")
    p.add_argument("--keys", type=int, default=10)
    p.add_argument("--per-key", type=int, default=20)
    p.add_argument("--tag", default="t")
    p.add_argument("--expect", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60.0)
    # group member options
    p.add_argument("--group", default="")
    p.add_argument("--instance-id", default="")
    p.add_argument("--assignor", default="")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    p.add_argument("--max-poll-interval-ms", type=int, default=0)
    p.add_argument("--max-poll-records", type=int, default=0)
    p.add_argument("--process-delay-ms", type=int, default=0)
    p.add_argument("--commit", action="store_true",
                   help="commit synchronously after each processed batch")
    # security (PLAINTEXT when not given)
    p.add_argument("--security-protocol", default="PLAINTEXT")
    p.add_argument("--sasl-mechanism", default="")
    p.add_argument("--user", default="")
    p.add_argument("--password", default="")
    p.add_argument("--ca", default="", help="PEM file of the CA that signed the broker's certificate")
    # transactions
    p.add_argument("--isolation", default="read_uncommitted",
                   help="consume: read_uncommitted or read_committed")
    p.add_argument("--txn-id", default="", help="transact: the transactional id")
    # configs
    p.add_argument("--broker-id", default="1", help="configs: the broker resource described")
    return p


def librdkafka_security(args):
    """librdkafka properties (kcat -X, confluent-kafka) for the security options."""
    conf = {}
    if args.security_protocol != "PLAINTEXT":
        conf["security.protocol"] = args.security_protocol
    if args.sasl_mechanism:
        conf.update({"sasl.mechanisms": args.sasl_mechanism, "sasl.username": args.user,
                     "sasl.password": args.password})
    if args.ca:
        conf["ssl.ca.location"] = args.ca
    return conf


def kafka_python_security(args):
    """kafka-python keyword arguments for the security options."""
    kw = {"security_protocol": args.security_protocol}
    if args.sasl_mechanism:
        kw.update(sasl_mechanism=args.sasl_mechanism, sasl_plain_username=args.user,
                  sasl_plain_password=args.password)
    if args.ca:
        kw["ssl_cafile"] = args.ca
    return kw


# Kafka's ConfigSource ids (DescribeConfigs v1+), by name.
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


def config_entry(value, source, sensitive, synonyms):
    """One config of command "configs": synonyms are (source, name, value) triples."""
    return {"value": value, "source": source, "sensitive": sensitive,
            "synonyms": ["%s:%s=%s" % s for s in synonyms]}


def txn_commits(seq):
    """Whether the transaction of round seq commits (command "transact"): every round
    is one transaction of one record per key; every third, from round 1, aborts."""
    return seq % 3 != 1


def hard_deadline(seconds):
    """Kills the process (exit code 3, JSON error) after seconds, whatever it is doing."""

    def expired(signum, frame):
        sys.stdout.write(json.dumps({"error": "driver timeout after %gs" % seconds}) + "\n")
        sys.stdout.flush()
        os._exit(3)

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(max(1, int(seconds)))


def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def split_bootstrap(addr):
    host, _, port = addr.rpartition(":")
    return host, int(port)


def run(description, commands):
    """Parses arguments, arms the deadline and runs commands[args.command](args).

    The command returns a dict, printed as the summary; an exception becomes
    {"error": ...} with exit status 1.
    """
    args = parser(description).parse_args()
    hard_deadline(args.timeout)
    fn = commands.get(args.command)
    if fn is None:
        emit({"error": "unknown command %r" % args.command})
        sys.exit(2)
    try:
        out = fn(args)
    except Exception as e:  # report, do not hide: the Go test prints it
        emit({"error": "%s: %s" % (type(e).__name__, e)})
        sys.exit(1)
    if out is not None:
        emit(out)
    sys.stdout.flush()
    os._exit(0)  # do not wait for client background threads
