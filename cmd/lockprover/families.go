package main

// The lock families the CLI proves and judges. Families judged beside
// amqp-locks register themselves with model, so that check (and anything
// else calling model.Check) judges the locks of their kind.
import (
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	_ "github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/prover"
)

// A mutantEntry is one mutant of a family, with the family that proves it.
type mutantEntry struct {
	Name, Property, Defect string
	Family                 prover.Family
}

// mutantsOf is the mutant catalogue of the family whose --kind is kind:
// amqp-locks' for semaphore (and mutex), the database semaphore's for
// db-semaphore.
func mutantsOf(kind string) []mutantEntry {
	var out []mutantEntry
	if kind == dbsemaphore.Kind {
		for _, m := range dbsemaphore.Mutants {
			out = append(out, mutantEntry{m.Name, m.Property, m.Defect, dbsemaphore.Config{Mutant: m.Name}})
		}
		return out
	}
	for _, m := range amqp.Mutants {
		out = append(out, mutantEntry{m.Name, m.Property, m.Defect, amqp.Config{Mutant: m.Name}})
	}
	return out
}
