# The tests CI runs (.ci/run calls `make test`). RabbitMQ-backed tests use
# LOCKPROVER_AMQP_URL, or a broker on 127.0.0.1:5672, and skip without one.
.PHONY: test long check static transcripts fmt vet bench fuzz

# Most of the suite waits on real servers and processes rather than on the
# CPU, so packages run four at a time (-p; go's default is one per CPU) and
# a package's parallel tests eight at a time (-parallel; the same default).
# A test that must not overlap the other tests of its package does not call
# t.Parallel. The packages that take longest are named first, so that they
# start first (./... adds the rest): their order is their times in make
# test on a quiet machine (docs/measurements/suite.md). Named seventh,
# examples/upstream (255 s) started after 102 s and ended the suite. The limit is a backstop for a wedged
# real server: 20 minutes, since adapters/runners/amqprun took 922 s beside
# the suite on two cores (386 s alone). -count=1: go test caches a package's passing result while
# its code and files are unchanged, and a real server's answers are
# neither, so nothing is taken from an earlier run (a clean clone on the
# same machine shares Go's cache). scripts/test-again runs each test that failed once more,
# alone, and names it as flaky when it passes then; one that fails again,
# or a package that fails otherwise, fails the target.
# The long tests (internal/quick's Long: private clusters under partition,
# servers of other versions from Debian roots, searches of minutes on a
# real server) skip here, saying so: make long runs them.
SLOWEST = ./examples/upstream ./adapters/runners/amqprun ./adapters/runners/pgadvisoryrun ./cmd/lockprover/cli ./adapters/runners/dbsemrun ./adapters/runners/consulsemrun ./adapters/runners/redlockrun ./cmd/lockprover/consulsemcli ./adapters/conform ./cmd/lockprover/all ./adapters/servers/postgres ./adapters/conform/consulconform ./adapters/servers/etcd ./model/consulsem ./adapters/servers/rabbitmq ./model/redlock ./adapters/runners/redlockrun/redlockprotocol
test: fmt vet
	scripts/test-again -count=1 -p 6 -parallel 8 -timeout 20m $(SLOWEST) ./...

# The long tests alone (scripts/long-tests finds them by their call of
# quick.Long), with LOCKPROVER_LONG set so that they run. CI runs make test,
# then this.
# Its slowest packages first (adapters/servers/rabbitmq's long tests run one after
# another).
LONG_FIRST = ./adapters/servers/rabbitmq ./adapters/runners/amqprun/khepri ./adapters/runners/amqprun/clusters
long:
	LOCKPROVER_LONG=1 scripts/test-again -count=1 -p 4 -parallel 8 -timeout 15m -run '$(shell scripts/long-tests pattern)' $(LONG_FIRST) $(filter-out $(LONG_FIRST),$(shell scripts/long-tests packages))

# The Dockerfile's static build (examples/ci/Dockerfile: CGO_ENABLED=0
# -trimpath), run as its RUN line says, and the binary it makes proving in a
# broker's container where Docker is (TestDockerfileBuilds,
# TestProveDockerAuto). It compiles the standard library and every package
# again (minutes on two cores, and again after each change to the tree), so
# it is a job of its own, which .ci/run runs before make test; make test
# skips both tests.
static:
	LOCKPROVER_STATIC_BUILD=1 go test -count=1 -timeout 15m -run '^(TestDockerfileBuilds|TestProveDockerAuto)$$' ./cmd/lockprover/cli

# The quick inner loop: the simulators, the checkers, every family's
# simulated runs, and one short run per real server (TestSmoke in
# cmd/lockprover/cli: the reference proving two plans on RabbitMQ, MariaDB,
# Redis, Consul and etcd, each skipped when its server is missing here).
# go test -short skips every other test that needs a real server, a private
# server or an implementation's processes (internal/quick says which), and
# the packages that are only about real servers are left to make test.
CHECK_LEAVES = /adapters/servers/(consul|etcd|mariadb|rabbitmq|rabbitmq/amqpproxy|redis)$$|/adapters/host/netns$$|/adapters/conform$$|/examples/upstream$$|/scripts$$
check: fmt vet
	go test -short -p 4 -parallel 8 $$(go list ./... | grep -Ev '$(CHECK_LEAVES)')

# Every command README.md and docs/*.md show being run on the simulator
# prints what they show (TestDocTranscripts; about ten minutes).
# LOCKPROVER_TRANSCRIPTS=all runs those on real servers too, on a machine
# .ci/run has set up; LOCKPROVER_TRANSCRIPTS_FILES=README.md,docs/ci.md
# narrows it to some pages.
transcripts:
	LOCKPROVER_TRANSCRIPTS=$${LOCKPROVER_TRANSCRIPTS:-sim} go test -count=1 -timeout 60m -run '^TestDocTranscripts$$' ./cmd/lockprover/cli

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...
