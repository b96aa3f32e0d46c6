package main

// The lock families judged beside amqp-locks: each registers itself with
// model, so that check (and anything else calling model.Check) judges the
// locks of its kind.
import (
	_ "github.com/lockprover/lockprover/families/lease"
)
