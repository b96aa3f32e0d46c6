// Package redisconform answers "is the simulator telling the truth about
// Redis?": it runs drawn sequences of the commands and scripts the
// Redlock reference and the priority lock send, and of sorted sets (npm
// redis-semaphore's), on sim/redissim and on
// private redis-servers, and compares the answers step by step
// (differential.go says what is compared, with what tolerance, and when a
// run cannot be judged). It backs `lockprover conform --kind redlock`
// (Differential).
//
// It lives beside the other differentials (adapters/conform), not in the
// simulator, so that sim/redissim imports no server's client: the
// differential speaks to Redis through go-redis, set as the reference's
// clients are.
package redisconform
