package redisserve_test

import (
	"fmt"
	"reflect"
	"sort"
	"time"
)

func fmtAny(v any) string { return fmt.Sprintf("%#v", v) }

// equal compares replies: errors by text, durations within a
// millisecond, the rest deeply.
func equal(got, want any) bool {
	ge, gok := got.(error)
	we, wok := want.(error)
	if gok || wok {
		return gok && wok && ge.Error() == we.Error()
	}
	if g, ok := got.(time.Duration); ok {
		if w, ok := want.(time.Duration); ok {
			return g-w < time.Millisecond && w-g < time.Millisecond
		}
	}
	return reflect.DeepEqual(got, want)
}

func slicesSort(xs []string) { sort.Strings(xs) }

func itoa(i int) string { return fmt.Sprint(i) }
