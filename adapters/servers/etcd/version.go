package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ServerVersion asks the etcd member at addr (its client URL) its version
// through c (within 10 s) and says it as "etcd 3.4.23": the server a
// differential (adapters/conform/consulconform) reports it ran against.
func ServerVersion(ctx context.Context, c *clientv3.Client, addr string) (string, error) {
	cx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Status(cx, addr)
	if err != nil {
		return "", fmt.Errorf("etcd: status: %w", err)
	}
	return "etcd " + st.Version, nil
}
