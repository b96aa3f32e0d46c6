package histories_test

// The kinds these tests read and write are declared by their families'
// checkers, as in any program that reads histories.
import (
	_ "github.com/lockprover/lockprover/model/amqpcheck"
	_ "github.com/lockprover/lockprover/model/lease"
)
