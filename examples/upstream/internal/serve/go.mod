module github.com/lockprover/lockprover/examples/upstream/internal/serve

go 1.26.0
