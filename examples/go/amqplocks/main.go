// Command amqplocks is an amqp-locks implementation (a persistent
// semaphore and a true mutex on RabbitMQ, docs/amqp-locks.md) on
// amqp091-go, go.mod's version, that serves lockprover's process protocol
// (docs/protocol-amqp-locks.md): a port of examples/python/amqp_locks.py,
// call for call, served as examples/python/lockprover_impl.py serves it
// but for when it connects again (below).
//
//	go build -o amqplocks ./examples/go/amqplocks
//	lockprover validate-impl --impl ./amqplocks
//	lockprover prove --target rabbitmq --impl ./amqplocks
//
// lockprover starts one process per client or admin of a run. It reads one
// JSON request per line on stdin and writes one JSON reply per line on
// stdout; logs go to stderr. The first request is init, which connects to
// the broker (trying for a few seconds, then answering init_ok anyway and
// leaving it to the first operation that needs the broker). On lockprover's
// simulated cluster init's "urls" name every node's port: each connection
// goes to the first node that takes it, its own node's first. A connection
// lost later is reported by the operation that meets it (an error, or
// held:false for a verify). A new connection, which holds nothing, is
// opened before the reply of any operation but a verify that finds the
// connection lost, and else by the next acquire or admin operation. Never
// while idle nor after a reply: lockprover charges an operation with the
// AMQP methods its process sent between the request and the reply, and a
// handshake begun while idle would be charged, in part, to a verify that
// came meanwhile (cheap-verify: a verify sends one publish and nothing
// else). At EOF on stdin (or on SIGTERM) the server closes its connection
// and exits 0.
//
// init_ok declares "abrupt_close": "heartbeat": amqp091-go ends a socket
// without a connection.close only when its heartbeat read deadline passes
// (three heartbeats with nothing read); everywhere else it closes
// politely, and so does this server when it exits. With a defect, init_ok
// declares nothing, as serve-reference's mutants do.
//
// --defect NAME seeds one defect, for showing that lockprover catches it:
//
//	trust-scan  acquire trusts its scan (the reference's mutant of that
//	            name): it returns a slot whose B probe said free without
//	            declaring B[L], so two clients can hold one slot. The true
//	            mutex is unchanged.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	defect := flag.String("defect", "", "seed a defect: trust-scan (acquire returns a slot without declaring its B queue)")
	flag.Parse()
	if flag.NArg() > 0 || *defect != "" && *defect != "trust-scan" {
		fmt.Fprintln(os.Stderr, "usage: amqplocks [--defect trust-scan]")
		os.Exit(2)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *defect != "" {
		log.Printf("seeded defect: %s", *defect)
	}
	os.Exit(serve(os.Stdin, os.Stdout, &server{defect: *defect, exit: -1}))
}

// serve answers the requests of in on out, one after the other, until in
// ends or SIGTERM comes; it returns the exit status.
func serve(in io.Reader, out io.Writer, s *server) int {
	lines := make(chan []byte)
	go readLines(in, lines)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer s.close()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				log.Print("stdin closed: exiting")
				return 0
			}
			s.serveLine(line, out)
			if s.exit >= 0 {
				return s.exit
			}
		case <-term:
			log.Print("SIGTERM: exiting")
			return 0
		}
	}
}

// serveLine answers one line: a request, or what is not one.
func (s *server) serveLine(line []byte, out io.Writer) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var req request
	var r reply
	if err := json.Unmarshal(line, &req); err != nil || req == nil {
		log.Printf("not a JSON object: %.200s", line)
		r = reply{"id": 0, "type": "error", "code": "bad request", "text": "a request must be one JSON object", "definite": true}
	} else {
		r = s.handle(req)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // one line, its newline included
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		b.Reset()
		enc.Encode(reply{"id": req["id"], "type": "error", "code": "internal", "text": err.Error()})
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		log.Printf("writing a reply: %v", err)
	}
}

// readLines sends each line of in (the last one even without a newline)
// on lines, and closes it at the end of in.
func readLines(in io.Reader, lines chan<- []byte) {
	defer close(lines)
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			lines <- line
		}
		if err != nil {
			return
		}
	}
}
