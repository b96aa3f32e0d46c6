package histories_test

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

// A runner records what its clients see with a Recorder, then saves the
// history with Write.
func ExampleRecorder() {
	var now int64 // a simulator's virtual clock, in nanoseconds
	r := histories.NewRecorder(func() int64 { return now })

	r.Add(histories.Event{Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "sem"})
	r.Add(histories.Event{Process: "c2", Type: histories.Invoke, F: "acquire", Lock: "sem"}) // same instant
	now = 1800
	r.Add(histories.Event{Process: "c1", Type: histories.Ok, F: "acquire", Lock: "sem",
		Value: &amqpcheck.Value{Slot: histories.Int(1)}})
	now = 2500
	r.Add(histories.Event{Process: "c2", Type: histories.Fail, F: "acquire", Lock: "sem",
		Value: &amqpcheck.Value{Reason: "full"}})

	if err := histories.Write(os.Stdout, r.Events()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"index":0,"time":0,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}
	// {"index":1,"time":1,"process":"c2","type":"invoke","f":"acquire","lock":"sem"}
	// {"index":2,"time":1800,"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":1}}
	// {"index":3,"time":2500,"process":"c2","type":"fail","f":"acquire","lock":"sem","value":{"reason":"full"}}
}

// A checker reads a history, from any source, and gets the events or the
// first problem, located.
func ExampleRead() {
	const history = `{"index":0,"time":1200,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}
{"index":1,"time":1800,"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2}}
{"index":2,"time":2500,"process":"nemesis","type":"invoke","f":"kill","value":{"process":"c1"}}
{"index":3,"time":2510,"process":"nemesis","type":"info","f":"kill","value":{"process":"c1"}}
`
	events, err := histories.Read(strings.NewReader(history), "history.jsonl")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range events {
		fmt.Printf("%d %s %s %s", e.Time, e.Process, e.Type, e.F)
		if v := amqpcheck.ValueOf(&e); v != nil && v.Slot != nil {
			fmt.Printf(" slot %d", *v.Slot)
		}
		fmt.Println()
	}

	_, err = histories.Read(strings.NewReader(history+
		`{"index":4,"time":2600,"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"held":true}}`),
		"history.jsonl")
	var bad *histories.Error
	if errors.As(err, &bad) {
		fmt.Println("line", bad.Line)
	}
	fmt.Println(err)
	// Output:
	// 1200 c1 invoke acquire
	// 1800 c1 ok acquire slot 2
	// 2500 nemesis invoke kill
	// 2510 nemesis info kill
	// line 5
	// history.jsonl:5: type: ok for process "c1", which has no operation in flight (want an invoke first)
}
