# The tests CI runs (.ci/run calls `make test`). RabbitMQ-backed tests use
# LOCKPROVER_AMQP_URL, or a broker on 127.0.0.1:5672, and skip without one.
.PHONY: test fmt vet bench fuzz

# Most of the suite waits on real servers and processes rather than on the
# CPU, so packages run four at a time (-p; go's default is one per CPU) and
# a package's parallel tests eight at a time (-parallel; the same default).
# A test that must not overlap the other tests of its package does not call
# t.Parallel. The packages that take longest are named first, so that they
# start first (./... adds the rest). The limit is a backstop for a wedged
# real server. scripts/test-again runs each test that failed once more,
# alone, and names it as flaky when it passes then; one that fails again,
# or a package that fails otherwise, fails the target.
SLOWEST = ./families/amqp ./adapters/conform ./cmd/lockprover/cli ./families/dbsemaphore ./consulsem ./backends/rabbitmq ./redlock ./dbsem
test: fmt vet
	scripts/test-again -p 4 -parallel 8 -timeout 15m $(SLOWEST) ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...
