package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// AgentVersion asks the agent at addr (host:port, or its URL) its version
// (GET /v1/agent/self, within 10 s) and says it as "consul 1.20.2": the
// server a differential (adapters/conform/consulconform) reports it ran
// against.
func AgentVersion(ctx context.Context, addr string) (string, error) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	req, err := http.NewRequestWithContext(c, http.MethodGet, addr+"/v1/agent/self", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("consul: GET /v1/agent/self: %w", err)
	}
	defer resp.Body.Close()
	var self struct{ Config struct{ Version string } }
	if err := json.NewDecoder(resp.Body).Decode(&self); err != nil {
		return "", fmt.Errorf("consul: GET /v1/agent/self: %w", err)
	}
	return "consul " + self.Config.Version, nil
}
