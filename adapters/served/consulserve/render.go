package consulserve

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/lockprover/lockprover/sim/consulsim"
)

// render writes rep, the agent's reply to ar (read from req), as Consul's
// handler does: JSON indented as a -dev agent indents it, the query's
// meta in headers for a read.
func (s *Broker) render(req *request, ar consulsim.APIRequest, rep consulsim.APIReply) response {
	if rep.Status != http.StatusOK {
		return *failed(rep.Status, rep.Error)
	}
	var obj any
	switch ar.Op {
	case consulsim.KVGet:
		resp := response{status: http.StatusOK, header: meta(rep.Index)}
		if rep.NotFound {
			resp.status = http.StatusNotFound
			return resp
		}
		entries := make([]dirEntry, len(rep.Entries))
		for i, e := range rep.Entries {
			entries[i] = dirEntry{LockIndex: e.LockIndex, Key: e.Key, Flags: e.Flags, Value: e.Value, Session: e.Session, CreateIndex: e.CreateIndex, ModifyIndex: e.ModifyIndex}
			if len(e.Value) == 0 {
				entries[i].Value = nil
			}
		}
		return withJSON(resp, entries)
	case consulsim.SessionCreate:
		obj = struct{ ID string }{rep.ID}
	case consulsim.SessionRenew, consulsim.SessionInfo:
		sessions := make([]sessionEntry, len(rep.Sessions))
		for i, e := range rep.Sessions {
			sessions[i] = sessionEntry{ID: e.ID, Name: e.Name, Node: s.o.Node, LockDelay: int64(e.LockDelay), Behavior: e.Behavior, TTL: e.TTL,
				NodeChecks: []string{"serfHealth"}, CreateIndex: e.CreateIndex, ModifyIndex: e.ModifyIndex}
		}
		resp := response{status: http.StatusOK, header: map[string]string{}}
		if ar.Op == consulsim.SessionInfo {
			resp.header = meta(rep.Index)
		}
		return withJSON(resp, sessions)
	default:
		obj = rep.OK
	}
	return withJSON(response{status: http.StatusOK, header: map[string]string{}}, obj)
}

// meta is a read's headers (setMeta): its index, a known leader, no lag.
func meta(index uint64) map[string]string {
	return map[string]string{"X-Consul-Index": strconv.FormatUint(max(index, 1), 10), "X-Consul-KnownLeader": "true",
		"X-Consul-LastContact": "0", "X-Consul-Query-Backend": "blocking-query"}
}

// withJSON is resp with obj as its body, as a -dev agent writes JSON.
func withJSON(resp response, obj any) response {
	b, _ := json.MarshalIndent(obj, "", "    ")
	resp.body = append(b, '\n')
	resp.header["Content-Type"] = "application/json"
	return resp
}

// dirEntry is a key as Consul writes it (structs.DirEntry).
type dirEntry struct {
	LockIndex   uint64
	Key         string
	Flags       uint64
	Value       []byte
	Session     string `json:",omitempty"`
	CreateIndex uint64
	ModifyIndex uint64
}

// sessionEntry is a session as Consul writes it (structs.Session).
type sessionEntry struct {
	ID            string
	Name          string
	Node          string
	LockDelay     int64
	Behavior      string
	TTL           string
	NodeChecks    []string
	ServiceChecks []string
	CreateIndex   uint64
	ModifyIndex   uint64
}

// encode is url.Values.Encode of q (Consul's words for conflicting
// flags).
func encode(q map[string][]string) string { return url.Values(q).Encode() }
