package amqprun

import (
	"encoding/json"
	"slices"
	"strconv"
)

// AppendJSON appends p as encoding/json's Encoder writes it (compact, its
// newline after), byte for byte, without reflection: a search writes
// every plan it draws into its batch's digest, and encoding/json took
// some 4% of a proof's CPU doing so (prover's digest uses this when a
// plan has it). TestAppendJSONIsEncodingJSON holds it to encoding/json on
// drawn plans of every shape; a field added to Plan, Options, Step or
// Fault must be added here too, or that test fails.
func (p *Plan) AppendJSON(b []byte) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(p.Version), 10)
	b = append(b, `,"kind":`...)
	b = appendString(b, p.Kind)
	b = append(b, `,"lock":`...)
	b = appendString(b, p.Lock)
	b = append(b, `,"slots":`...)
	b = strconv.AppendInt(b, int64(p.Slots), 10)
	b = append(b, `,"options":`...)
	b = p.Options.appendJSON(b)
	if p.Mutant != "" {
		b = append(b, `,"mutant":`...)
		b = appendString(b, p.Mutant)
	}
	b = append(b, `,"clients":`...)
	b = appendScripts(b, p.Clients)
	b = append(b, `,"admins":`...)
	b = appendScripts(b, p.Admins)
	b = append(b, `,"nemesis":`...)
	b = appendFaults(b, p.Nemesis)
	if len(p.Cluster) > 0 {
		b = append(b, `,"cluster":`...)
		b = appendStrings(b, p.Cluster)
	}
	if len(p.Nodes) > 0 {
		b = append(b, `,"nodes":`...)
		b = appendNodes(b, p.Nodes)
	}
	if p.PartitionHandling != "" {
		b = append(b, `,"partition_handling":`...)
		b = appendString(b, p.PartitionHandling)
	}
	b = append(b, `,"schedule":`...)
	b = appendInts(b, p.Schedule)
	b = append(b, `,"schedule_seed":`...)
	b = strconv.AppendUint(b, p.ScheduleSeed, 10)
	if p.Model != "" {
		b = append(b, `,"model":`...)
		b = appendString(b, p.Model)
	}
	if len(p.Properties) > 0 {
		b = append(b, `,"properties":`...)
		b = appendStrings(b, p.Properties)
	}
	return append(b, "}\n"...)
}

// appendFaults appends faults as a JSON array, null if nil.
func appendFaults(b []byte, faults []Fault) []byte {
	if faults == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, f := range faults {
		if i > 0 {
			b = append(b, ',')
		}
		b = f.appendJSON(b)
	}
	return append(b, ']')
}

// appendStrings appends ss as a JSON array (of a plan's fields that
// leave out an empty one).
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendNodes appends nodes as a JSON object, its keys sorted as
// encoding/json sorts a map's.
func appendNodes(b []byte, nodes map[string]string) []byte {
	b = append(b, '{')
	keys := make([]string, 0, len(nodes))
	for k := range nodes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, nodes[k])
	}
	return append(b, '}')
}

// appendInts appends ns as a JSON array, null if nil.
func appendInts(b []byte, ns []int) []byte {
	if ns == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, ']')
}

func (o *Options) appendJSON(b []byte) []byte {
	b = append(b, '{')
	n := 0
	field := func(name string) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			b = appendString(b, v)
		}
	}
	num := func(name string, v int) {
		if v != 0 {
			field(name)
			b = strconv.AppendInt(b, int64(v), 10)
		}
	}
	flag := func(name string, v bool) {
		if v {
			field(name)
			b = append(b, "true"...)
		}
	}
	if o.HeartbeatMs != nil {
		field("heartbeat_ms")
		b = strconv.AppendInt(b, int64(*o.HeartbeatMs), 10)
	}
	str("delete_order", o.DeleteOrder)
	num("overshoot", o.Overshoot)
	str("scan_start", o.ScanStart)
	num("contention_retries", o.ContentionRetries)
	num("jitter_ms", o.JitterMs)
	flag("skip_verify_after_acquire", o.SkipVerifyAfterAcquire)
	str("verify_method", o.VerifyMethod)
	flag("no_admin_mutex", o.NoAdminMutex)
	flag("transient_slots", o.TransientSlots)
	flag("no_length_limit", o.NoLengthLimit)
	flag("lazy_connect", o.LazyConnect)
	str("channels", o.Channels)
	flag("reconnect", o.Reconnect)
	flag("plain_failure", o.PlainFailure)
	flag("tidy_verify", o.TidyVerify)
	return append(b, '}')
}

func appendScripts(b []byte, scripts [][]Step) []byte {
	if scripts == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, script := range scripts {
		if i > 0 {
			b = append(b, ',')
		}
		if script == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, s := range script {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"op":`...)
			b = appendString(b, s.Op)
			if s.Ms != 0 {
				b = append(b, `,"ms":`...)
				b = strconv.AppendInt(b, int64(s.Ms), 10)
			}
			if s.Delta != 0 {
				b = append(b, `,"delta":`...)
				b = strconv.AppendInt(b, int64(s.Delta), 10)
			}
			if s.Slot != 0 {
				b = append(b, `,"slot":`...)
				b = strconv.AppendInt(b, int64(s.Slot), 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

func (f *Fault) appendJSON(b []byte) []byte {
	b = append(b, `{"at_ms":`...)
	b = strconv.AppendInt(b, int64(f.At), 10)
	if f.AfterCalls != 0 {
		b = append(b, `,"after_calls":`...)
		b = strconv.AppendInt(b, int64(f.AfterCalls), 10)
	}
	b = append(b, `,"fault":`...)
	b = appendString(b, f.Fault)
	for _, s := range [...]struct{ name, v string }{{"target", f.Target}, {"node", f.Node}, {"cut", f.Cut}} {
		if s.v != "" {
			b = append(b, `,"`...)
			b = append(b, s.name...)
			b = append(b, `":`...)
			b = appendString(b, s.v)
		}
	}
	if f.For != 0 {
		b = append(b, `,"for_ms":`...)
		b = strconv.AppendInt(b, int64(f.For), 10)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string as encoding/json writes it
// (escaping HTML's <, > and &, and what is not valid UTF-8): plain
// printable ASCII directly, anything else through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
