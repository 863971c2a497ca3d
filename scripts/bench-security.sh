#!/usr/bin/env bash
# Round-robin: PLAINTEXT, SASL_PLAINTEXT (SCRAM-SHA-256), SSL and SASL_SSL listeners of one
# samsa serve, and two null brokers in processes of their own (plain and TLS, the same
# certificate): produce then consume RECORDS (default 1,000,000) records of 1 KiB, ROUNDS (default 5)
# rounds, the page cache primed before every produce run.
set -u
# Needs ca.pem and server.pem (key + certificate for IP 127.0.0.1) in DIR (default: the current
# directory) and a built samsa binary as $SAMSA (default: samsa on PATH).
cd "${1:-.}"
S=${SAMSA:-samsa}
rm -rf data; mkdir data
$S serve --override log.dirs=$PWD/data \
  --override listeners=PLAINTEXT://127.0.0.1:29092,SASL_PLAINTEXT://127.0.0.1:29093,SSL://127.0.0.1:29094,SASL_SSL://127.0.0.1:29095 \
  --override sasl.enabled.mechanisms=SCRAM-SHA-256 \
  --override ssl.keystore.location=$PWD/server.pem \
  --add-scram 'SCRAM-SHA-256=[name=bench,password=bench-secret]' > serve.log 2>&1 &
P1=$!
$S bench null-broker --listen 127.0.0.1:29096 > null.log 2>&1 &
P2=$!
$S bench null-broker --listen 127.0.0.1:29097 --tls-keystore $PWD/server.pem > nulltls.log 2>&1 &
P3=$!
trap "kill $P1 $P2 $P3" EXIT
for i in $(seq 50); do grep -q "samsa ready" serve.log && break; sleep 0.2; done
sleep 1
SCRAM="--sasl-mechanism SCRAM-SHA-256 --user bench --password bench-secret"
TLS="--tls-ca $PWD/ca.pem"
declare -A ARGS=(
  [plaintext]="-b 127.0.0.1:29092"
  [sasl_plaintext]="-b 127.0.0.1:29093 $SCRAM"
  [ssl]="-b 127.0.0.1:29094 $TLS"
  [sasl_ssl]="-b 127.0.0.1:29095 $TLS $SCRAM"
  [null-process]="-b 127.0.0.1:29096"
  [null-process-tls]="-b 127.0.0.1:29097 $TLS"
)
N=${RECORDS:-1000000}
mb() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["mb_per_sec"],1))'; }
# prime writes back dirty pages and primes the page cache with a scratch file of a run's
# size (as `samsa bench suite` does, see docs/performance.md): this VM hands freed memory
# back to its host, and a run whose page cache lands in such pages pays a host fault per
# page, whichever listener it uses.
prime() {
  sync
  dd if=/dev/zero of=data/.prime bs=1M count=$((N * 11 / 10 / 1000)) status=none
  rm -f data/.prime
  sync # the scratch file's writeback and freed blocks, or they stall the run that follows
}
ROUNDS=${ROUNDS:-5}
for round in $(seq $ROUNDS); do
  echo "round $round load $(cut -d' ' -f1 /proc/loadavg)"
  # Every other round runs the targets in the reverse order, so that no target always
  # follows the same one.
  targets="plaintext sasl_plaintext ssl sasl_ssl null-process null-process-tls"
  if [ $((round % 2)) = 0 ]; then targets=$(echo $targets | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for t in $targets; do
    prime
    echo "produce $t $round $($S bench produce ${ARGS[$t]} --topic b-$t-$round --records $N --record-size 1024 -o json 2>/dev/null | mb)"
  done
  for t in $targets; do
    extra=""; case $t in null*) extra="--records $N";; esac
    echo "consume $t $round $($S bench consume ${ARGS[$t]} --topic b-$t-$round $extra -o json 2>/dev/null | mb)"
  done
  for t in plaintext sasl_plaintext ssl sasl_ssl; do # what a round wrote is not kept
    $S topic delete -b 127.0.0.1:29092 b-$t-$round > /dev/null
  done
done
