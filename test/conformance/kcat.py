#!/usr/bin/python3
"""Conformance driver for kcat (librdkafka's command-line client).

Commands: codecs, metadata, produce, consume (see common.py for the contract).
kcat cannot create topics; the Go test creates them for it. Per-record headers
cannot be set from kcat's line input, so records produced here carry none.
"""

import json
import subprocess

import common

KCAT = "kcat"


def kcat(args, extra, stdin=None):
    cmd = [KCAT, "-b", args.bootstrap, "-X", "broker.address.family=v4"]
    for k, v in common.librdkafka_security(args).items():
        cmd += ["-X", "%s=%s" % (k, v)]
    cmd += extra
    remaining = max(1.0, args.timeout - 2)
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=remaining)
    if p.returncode != 0:
        raise RuntimeError("kcat %s exited %d: %s" % (" ".join(extra), p.returncode,
                                                      p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout.decode(), p.stderr.decode(errors="replace")


def cmd_codecs(args):
    out = subprocess.run([KCAT, "-V"], capture_output=True, timeout=10).stdout.decode()
    codecs = ["none"]
    for c in ("gzip", "snappy", "lz4", "zstd"):
        if c in out:
            codecs.append(c)
    return {"client": "kcat", "codecs": codecs}


def cmd_metadata(args):
    out, _ = kcat(args, ["-L", "-J"])
    md = json.loads(out)
    brokers = []
    for b in md.get("brokers", []):
        host, port = common.split_bootstrap(b["name"])
        brokers.append({"id": b["id"], "host": host, "port": port})
    topics = {}
    for t in md.get("topics", []):
        if t.get("error"):
            continue
        topics[t["topic"]] = len(t.get("partitions", []))
    return {"client": "kcat", "brokers": brokers, "topics": topics,
            "controller": md.get("controllerid")}


def cmd_produce(args):
    lines = []
    n = 0
    for key, value, _seq in common.generate(args.tag, args.keys, args.per_key):
        lines.append("%s=%s\n" % (key, value))
        n += 1
    extra = ["-P", "-t", args.topic, "-K", "=", "-z", args.codec,
             "-X", "linger.ms=20", "-X", "acks=all", "-X", "enable.idempotence=true"]
    _, stderr = kcat(args, extra, stdin="".join(lines).encode())
    if "ERROR" in stderr or "Failed" in stderr:
        raise RuntimeError("kcat produce: " + stderr[-2000:])
    return {"client": "kcat", "produced": n, "codec": args.codec, "acks": []}


def cmd_consume(args):
    out, _ = kcat(args, ["-C", "-t", args.topic, "-o", "beginning", "-e", "-J", "-q",
                         "-X", "check.crcs=true", "-X", "isolation.level=" + args.isolation])
    records = []
    for line in out.splitlines():
        line = line.strip()
        if not line:
            continue
        m = json.loads(line)
        headers = {}
        h = m.get("headers") or []
        for i in range(0, len(h) - 1, 2):
            headers[h[i]] = h[i + 1]
        records.append({"partition": m["partition"], "offset": m["offset"],
                        "key": m.get("key"), "value": m.get("payload"),
                        "headers": headers})
    return {"client": "kcat", "records": records}


if __name__ == "__main__":
    common.run("kcat conformance driver", {
        "codecs": cmd_codecs,
        "metadata": cmd_metadata,
        "produce": cmd_produce,
        "consume": cmd_consume,
    })
