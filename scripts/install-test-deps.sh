#!/usr/bin/env bash
# Installs the external Kafka clients used by the conformance suite
# (test/conformance) and the browser the web console's tests drive
# (internal/console), only when they are missing. Safe to run repeatedly.
#
#   Debian: kcat, python3-kafka (kafka-python), python3-confluent-kafka, chromium
#   npm:    kafkajs, pinned in test/conformance/package.json + package-lock.json
#
# The Debian Python clients import only under /usr/bin/python3 (the python3
# first on PATH may be a separate build), so that is the interpreter checked.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
conformance="$root/test/conformance"

log() { printf 'install-test-deps: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		log "need root to run: $*"
		return 1
	fi
}

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
if ! /usr/bin/python3 -c 'import kafka' >/dev/null 2>&1; then
	missing+=(python3-kafka)
fi
if ! /usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1; then
	missing+=(python3-confluent-kafka)
fi
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

if [ "${#missing[@]}" -gt 0 ]; then
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -qq >/dev/null
	as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

want_kafkajs="$(sed -n 's/.*"kafkajs": *"\([^"]*\)".*/\1/p' "$conformance/package.json" | head -n1)"
have_kafkajs=""
if [ -f "$conformance/node_modules/kafkajs/package.json" ]; then
	have_kafkajs="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$conformance/node_modules/kafkajs/package.json" | head -n1)"
fi
if [ "$have_kafkajs" != "$want_kafkajs" ]; then
	log "installing kafkajs $want_kafkajs with npm"
	(cd "$conformance" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# Final check: fail loudly here rather than in the middle of the test run.
command -v kcat >/dev/null
/usr/bin/python3 -c 'import kafka, confluent_kafka'
node -e "require('$conformance/node_modules/kafkajs')"
command -v chromium >/dev/null
