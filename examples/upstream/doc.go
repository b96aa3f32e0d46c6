// Package upstream holds adapters that run other people's lock
// implementations, as they are, through lockprover's process protocol
// (docs/protocol.md), and the tests that keep those adapters working
// without the upstream code: each adapter is run end to end on a test
// double of the upstream API written here (testdata/), through the same
// command line a user gives.
//
//   - amqp_locks_python.py: zbentley/amqp-locks-python (amqp-locks), from a
//     checkout named by $LOCKPROVER_AMQP_LOCKS_PYTHON or --checkout;
//     --pika-compat restores the one pika 0.x behaviour it relies on
//     (pika_compat.py).
//   - database_semaphore.py: zimingd/database-semaphore's stored procedures
//     (db-semaphore), from a checkout named by
//     $LOCKPROVER_DATABASE_SEMAPHORE or --checkout.
//
// The verdicts, and the commands that reproduce them, are in
// docs/verdicts.md.
package upstream
