# Samsa — build and test entry points. `make test` is the only command CI needs.

GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

.PHONY: all build test test-deps vet unit fuzz bench clean

all: build

build:
	$(GO) build -o bin/samsa ./cmd/samsa

# Install the external clients the conformance suite drives (no-op when present),
# vet, then every test — the conformance suite in test/conformance is a Go test too.
test: test-deps vet unit

test-deps:
	bash scripts/install-test-deps.sh

vet:
	$(GO) vet $(PKGS)

# The timeout catches a hung package (with its goroutines' stacks); the cluster
# package's tests, three-process clusters under -race, take 8–9 minutes of it.
unit:
	$(GO) test -race -count=1 -timeout 16m $(PKGS)

# Short runs of every fuzz target: each FuzzXxx function in each package for $(FUZZTIME).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

clean:
	rm -rf bin
