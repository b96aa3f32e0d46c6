package amqprun

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// ParseOptions reads the reference's options as the command line gives
// them: comma-separated key=value pairs named as in plans (scan_start=random,
// channels=per-purpose), a bare key for a boolean that is true
// (lazy_connect). It starts from o and refuses, naming it, a key that no
// option has or a value of the wrong type.
func ParseOptions(o Options, spec string) (Options, error) {
	if strings.TrimSpace(spec) == "" {
		return o, nil
	}
	v := reflect.ValueOf(&o).Elem()
	fields := map[string]reflect.Value{}
	var names []string
	for i := 0; i < v.NumField(); i++ {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		fields[tag] = v.Field(i)
		names = append(names, tag)
	}
	for _, kv := range strings.Split(spec, ",") {
		key, val, hasVal := strings.Cut(strings.TrimSpace(kv), "=")
		f, ok := fields[key]
		if !ok {
			return o, fmt.Errorf("no option %q; the options are %s", key, strings.Join(names, ", "))
		}
		switch f.Kind() {
		case reflect.Bool:
			b := true
			if hasVal {
				var err error
				if b, err = strconv.ParseBool(val); err != nil {
					return o, fmt.Errorf("%s: want true or false, got %q", key, val)
				}
			}
			f.SetBool(b)
		case reflect.Int:
			n, err := strconv.Atoi(val)
			if err != nil {
				return o, fmt.Errorf("%s: want a whole number, got %q", key, val)
			}
			f.SetInt(int64(n))
		default:
			if !hasVal || val == "" {
				return o, fmt.Errorf("%s: needs a value (%s=...)", key, key)
			}
			f.SetString(val)
		}
	}
	if field, err := o.validate(); err != nil {
		return o, fmt.Errorf("%s: %w", field, err)
	}
	return o, nil
}

// String is the options as ParseOptions reads them, only those set.
func (o Options) String() string {
	b, _ := json.Marshal(o)
	var m map[string]any
	json.Unmarshal(b, &m)
	v := reflect.ValueOf(o)
	var parts []string
	for i := 0; i < v.NumField(); i++ {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		x, ok := m[tag]
		if !ok || v.Field(i).IsZero() {
			continue
		}
		if b, isBool := x.(bool); isBool && b {
			parts = append(parts, tag)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%v", tag, x))
	}
	return strings.Join(parts, ",")
}
