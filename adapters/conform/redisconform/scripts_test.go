package redisconform

import "github.com/lockprover/lockprover/adapters/served/redisserve"

// The tests run redis-semaphore's scripts on the simulator as the CLI
// does (Scripts).
func init() { Scripts = redisserve.NewLua }
