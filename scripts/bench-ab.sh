#!/usr/bin/env bash
# bench-ab.sh: compare two broker builds under 1 KiB produce, run by run.
#
#   scripts/bench-ab.sh OLD_BINARY NEW_BINARY [ROUNDS]
#
# Starts both brokers (127.0.0.1:19092 and :19094, data in /tmp/bench-ab-{a,b}) and a
# null broker in its own process (127.0.0.1:19093), then for each round produces 1 GB
# of 1 KiB records (the suite's 1 KiB scenario) to A, B and the null broker in turn,
# priming the page cache before each run as the suite does. Per run it prints the
# server's CPU time (all threads, from /proc/<pid>/task/*/schedstat) and MB/s; at the
# end the medians and each round's ratio to the null broker. Set ENV_B to give broker B
# extra environment (for example ENV_B=GOMAXPROCS=1), RECORD_SIZE and RECORDS to change
# the load. The produce client is NEW_BINARY's `bench produce`.
set -euo pipefail
A=$1 B=$2 ROUNDS=${3:-6}
RS=${RECORD_SIZE:-1024} RC=${RECORDS:-1000000}
CLIENT=$B
stop() { pkill -f "serve --override listeners=PLAINTEXT://127.0.0.1:1909[24]" || true; pkill -f "null-broker --listen 127.0.0.1:19093" || true; }
stop; sleep 0.5; rm -rf /tmp/bench-ab-a /tmp/bench-ab-b
trap 'stop; rm -rf /tmp/bench-ab-a /tmp/bench-ab-b /tmp/bench-ab-prime' EXIT
"$A" serve --override listeners=PLAINTEXT://127.0.0.1:19092 --override log.dirs=/tmp/bench-ab-a >/tmp/bench-ab-a.log 2>&1 &
PA=$!
env ${ENV_B:-} "$B" serve --override listeners=PLAINTEXT://127.0.0.1:19094 --override log.dirs=/tmp/bench-ab-b >/tmp/bench-ab-b.log 2>&1 &
PB=$!
"$CLIENT" bench null-broker --listen 127.0.0.1:19093 >/tmp/bench-ab-null.log 2>&1 &
PN=$!
sleep 1.5
cpu_ms() { cat /proc/"$1"/task/*/schedstat | awk '{s+=$1} END{printf "%d", s/1e6}'; }
out=$(mktemp)
for i in $(seq 1 "$ROUNDS"); do
  for side in a b null; do
    case $side in a) P=$PA port=19092;; b) P=$PB port=19094;; null) P=$PN port=19093;; esac
    rm -rf /tmp/bench-ab-a/t* /tmp/bench-ab-b/t*
    dd if=/dev/zero of=/tmp/bench-ab-prime bs=1M count=$((RS * RC * 13 / 10 >> 20)) 2>/dev/null; rm -f /tmp/bench-ab-prime; sync
    c0=$(cpu_ms "$P")
    mbs=$("$CLIENT" bench produce --against 127.0.0.1:$port --topic t$i --record-size "$RS" --records "$RC" 2>/dev/null |
      sed -n 's/.*records\/s, \([0-9.]*\) MB\/s.*/\1/p')
    c1=$(cpu_ms "$P")
    echo "$i $side $((c1 - c0)) $mbs" | tee -a "$out"
  done
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for side in a b null; do
  echo "$side: server CPU median $(awk -v s=$side '$2 == s {print $3}' "$out" | median) ms, MB/s median $(awk -v s=$side '$2 == s {print $4}' "$out" | median)"
done
for side in a b; do
  ratios=$(awk -v s=$side '$2 == s {m[$1] = $4} $2 == "null" {printf "%.2f\n", m[$1] / $4}' "$out")
  echo "$side / null per round: $(echo $ratios) (median $(echo "$ratios" | median))"
done
rm -f "$out"
