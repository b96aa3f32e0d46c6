package rabbitmq

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// DefaultURL is the broker every command and test uses when told of none
// (and $LOCKPROVER_AMQP_URL is unset): a local RabbitMQ with its default
// guest account.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// URL is the broker a command uses: the URL given, else
// $LOCKPROVER_AMQP_URL, else DefaultURL.
func URL(given string) string {
	if given != "" {
		return given
	}
	if u := os.Getenv("LOCKPROVER_AMQP_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// UniqueName is prefix followed by eight random hex digits: the name of a
// lock, or the prefix of a run's queues, that no other run on the same
// broker uses, so that runs never see each other's queues and each can
// delete what it made.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
