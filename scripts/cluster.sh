#!/usr/bin/env bash
# Starts and stops a three-node Samsa cluster on this machine: three combined
# broker+controller nodes (node.id 1–3) forming one metadata quorum.
#
#   scripts/cluster.sh up     [DIR]   build samsa, start the three nodes, wait until ready;
#                                     with some running, start the others (a node killed
#                                     or stopped comes back) with the binary they run
#   scripts/cluster.sh status [DIR]   which nodes run, and `samsa cluster info`
#   scripts/cluster.sh down   [DIR]   stop them (SIGTERM: controlled shutdown); data is kept
#
# DIR (default $SAMSA_CLUSTER_DIR, else /tmp/samsa-cluster) holds each node's data
# (DIR/node1 …), its log (DIR/node1.log), its pid, the binary and the ports. The
# ports are chosen on the first `up` (six free ones from 20000 on) and kept in
# DIR/ports, so a stopped cluster comes back on the same addresses. Extra
# properties for every node: SAMSA_OVERRIDES="key=value key=value".
# Start afresh with: scripts/cluster.sh down && rm -rf DIR
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmd="${1:-}"
dir="${2:-${SAMSA_CLUSTER_DIR:-/tmp/samsa-cluster}}"
nodes=(1 2 3)

log() { printf 'cluster.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

choose_ports() {
	local p=20000 found=()
	while [ "${#found[@]}" -lt 6 ] && [ "$p" -lt 32000 ]; do
		if port_free "$p"; then found+=("$p"); fi
		p=$((p + 1))
	done
	[ "${#found[@]}" -eq 6 ] || die "no six free ports between 20000 and 32000"
	printf '%s\n' "${found[@]}" >"$dir/ports"
}

load_ports() {
	mapfile -t ports <"$dir/ports"
	# node i: PLAINTEXT ports[i-1], CONTROLLER ports[i+2]
	voters=""
	for i in "${nodes[@]}"; do
		voters+="${voters:+,}$i@127.0.0.1:${ports[$((i + 2))]}"
	done
	bootstrap=""
	for i in "${nodes[@]}"; do
		bootstrap+="${bootstrap:+,}127.0.0.1:${ports[$((i - 1))]}"
	done
}

# running: node $1's process exists and has not exited (a killed node may stay a
# zombie until it is reaped).
running() {
	local st
	[ -f "$dir/node$1.pid" ] && st=$(ps -o stat= -p "$(cat "$dir/node$1.pid")" 2>/dev/null) && [[ $st != Z* ]]
}

up() {
	mkdir -p "$dir"
	local start=() i
	for i in "${nodes[@]}"; do
		running "$i" || start+=("$i")
	done
	[ "${#start[@]}" -gt 0 ] || die "all three nodes already run; use status or down"
	if [ "${#start[@]}" -eq "${#nodes[@]}" ]; then
		log "building samsa into $dir/samsa"
		(cd "$root" && go build -o "$dir/samsa" ./cmd/samsa)
	else
		log "starting node(s) ${start[*]} with the binary the others run ($dir/samsa)"
	fi
	[ -f "$dir/ports" ] || choose_ports
	load_ports
	for i in "${start[@]}"; do
		local extra=()
		for o in ${SAMSA_OVERRIDES:-}; do extra+=(--override "$o"); done
		[ ! -f "$dir/node$i.log" ] || mv "$dir/node$i.log" "$dir/node$i.log.1" # the previous run's, kept once
		nohup "$dir/samsa" serve \
			--override node.id="$i" \
			--override process.roles=broker,controller \
			--override controller.quorum.voters="$voters" \
			--override listeners="PLAINTEXT://127.0.0.1:${ports[$((i - 1))]},CONTROLLER://127.0.0.1:${ports[$((i + 2))]}" \
			--override advertised.listeners="PLAINTEXT://127.0.0.1:${ports[$((i - 1))]}" \
			--override controller.listener.names=CONTROLLER \
			--override log.dirs="$dir/node$i" \
			"${extra[@]}" >"$dir/node$i.log" 2>&1 &
		echo $! >"$dir/node$i.pid"
	done
	for i in "${start[@]}"; do
		local waited=0
		until grep -q 'msg="samsa ready"' "$dir/node$i.log" 2>/dev/null; do
			running "$i" || die "node $i exited; see $dir/node$i.log: $(tail -n 3 "$dir/node$i.log")"
			[ "$waited" -lt 600 ] || die "node $i not ready after 60 s; see $dir/node$i.log"
			sleep 0.1
			waited=$((waited + 1))
		done
	done
	log "node(s) ${start[*]} ready; data, logs and pids in $dir"
	echo "bootstrap servers: $bootstrap"
	echo "try: $dir/samsa cluster info -b $bootstrap"
}

down() {
	local pids=() st
	for i in "${nodes[@]}"; do
		if running "$i"; then
			pids+=("$(cat "$dir/node$i.pid")")
			kill -TERM "$(cat "$dir/node$i.pid")"
		fi
	done
	[ "${#pids[@]}" -gt 0 ] || { log "no node runs in $dir"; return 0; }
	local waited=0
	for p in "${pids[@]}"; do
		while st=$(ps -o stat= -p "$p" 2>/dev/null) && [[ $st != Z* ]]; do
			[ "$waited" -lt 300 ] || { log "pid $p still runs after 30 s; killing it"; kill -KILL "$p"; break; }
			sleep 0.1
			waited=$((waited + 1))
		done
	done
	rm -f "$dir"/node*.pid
	log "stopped; data kept in $dir (rm -rf it to start afresh)"
}

status() {
	[ -f "$dir/ports" ] || die "no cluster in $dir"
	load_ports
	for i in "${nodes[@]}"; do
		if running "$i"; then echo "node $i: running (pid $(cat "$dir/node$i.pid"))"; else echo "node $i: stopped"; fi
	done
	"$dir/samsa" cluster info -b "$bootstrap" | sed -n '1,/^API versions/p' | sed '$d'
}

case "$cmd" in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|status|down [DIR]" ;;
esac
