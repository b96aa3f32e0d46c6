# The tests CI runs (.ci/run calls `make test`). RabbitMQ-backed tests use
# LOCKPROVER_AMQP_URL, or a broker on 127.0.0.1:5672, and skip without one.
.PHONY: test fmt vet bench fuzz

# Packages whose real-broker proofs run one search at a time can pass go
# test's default 10-minute limit on a loaded 2-core machine.
test: fmt vet
	go test -timeout 15m ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...
