package redissim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"github.com/lockprover/lockprover/model/redlock"
	"slices"
	"strconv"
	"strings"
)

// The Lua scripts the servers know, implemented natively in Go and
// recognised by their exact source (EVAL) or its SHA1 (EVALSHA): those
// of the Redlock reference, their sources taken from redlock.ScriptSources
// (TestScriptsAreRedlocks runs them; the differential holds what they do
// to Redis's). Any other script is an error naming it, and makes Run
// fail.
type script struct {
	name string
	src  string
	sha  string
	run  func(s *server, keys, argv []string) (Result, error)
}

// scripts is filled by init: its functions call commands that run
// scripts.
var scripts []*script

func init() {
	sources := redlock.ScriptSources()
	scripts = []*script{
		{name: "acquire", src: sources["acquire"], run: runAcquire},
		{name: "raise", src: sources["raise"], run: runRaise},
		{name: "refresh", src: sources["refresh"], run: runRefresh},
		{name: "refreshSetNX", src: sources["refreshSetNX"], run: runRefreshSetNX},
		{name: "release", src: sources["release"], run: runRelease},
	}
	scripts = append(scripts, priorityScripts()...)
	for _, sc := range scripts {
		sum := sha1.Sum([]byte(sc.src))
		sc.sha = hex.EncodeToString(sum[:])
	}
}

func scriptBySource(src string) *script {
	for _, sc := range scripts {
		if sc.src == src {
			return sc
		}
	}
	return nil
}

func scriptBySHA(sha string) *script {
	sha = strings.ToLower(sha)
	for _, sc := range scripts {
		if sc.sha == sha {
			return sc
		}
	}
	return nil
}

// ScriptSHA1 is the SHA1 of a script's source, in hex, as EVALSHA names
// it.
func ScriptSHA1(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// cmdEval is EVAL source numkeys key... arg...; the script goes into the
// server's cache. A script not known natively runs on the wire's Lua
// interpreter (Wire.Lua), if there is one.
func cmdEval(s *server, args []string) Result {
	keys, argv, err := splitKeys(args)
	if err != nil {
		return Result{Err: err}
	}
	sc := scriptBySource(args[1])
	if sc == nil {
		if s.lua() != nil {
			sha, err := s.load(args[1])
			if err != nil {
				return Result{Err: err}
			}
			return s.runLua(sha, keys, argv)
		}
		first := strings.TrimSpace(args[1])
		if i := strings.IndexByte(first, '\n'); i >= 0 {
			first = first[:i] + " ..."
		}
		s.unmodelled("EVAL "+first, fmt.Errorf("redissim: %s: a script the simulator does not model (sha1 %s): %s", s.name, ScriptSHA1(args[1]), first))
		return Result{Err: Error(fmt.Sprintf("ERR redissim: unknown script %s (%s)", ScriptSHA1(args[1]), first))}
	}
	s.scripts[sc.sha] = true
	return runScript(s, sc, keys, argv)
}

// cmdEvalsha is EVALSHA sha1 numkeys key... arg...: NOSCRIPT unless the
// server was sent the script since it started.
func cmdEvalsha(s *server, args []string) Result {
	keys, argv, err := splitKeys(args)
	if err != nil {
		return Result{Err: err}
	}
	sha := strings.ToLower(args[1])
	if _, ok := s.sources[sha]; ok {
		return s.runLua(sha, keys, argv)
	}
	sc := scriptBySHA(sha)
	if sc == nil || !s.scripts[sc.sha] {
		return Result{Err: errNoScript}
	}
	return runScript(s, sc, keys, argv)
}

// load compiles src on the wire's interpreter and caches it: its SHA1.
func (s *server) load(src string) (string, error) {
	sha := ScriptSHA1(src)
	if _, ok := s.sources[sha]; ok {
		return sha, nil
	}
	if err := s.lua().Load(src); err != nil {
		return "", err
	}
	s.sources[sha] = src
	return sha, nil
}

// runLua runs the cached script sha on the wire's interpreter,
// atomically: its commands run here, in this step, BLPOP not blocking.
func (s *server) runLua(sha string, keys, argv []string) Result {
	atomic := s.atomic
	s.atomic = true
	defer func() { s.atomic = atomic }()
	return s.lua().Run(s.sources[sha], keys, argv, func(args []string) Result { return s.exec(args) })
}

// cmdScript is SCRIPT LOAD source, SCRIPT EXISTS sha1..., SCRIPT FLUSH
// [ASYNC|SYNC]: the script cache. A script not known natively is loaded
// on the wire's interpreter, if there is one.
func cmdScript(s *server, args []string) Result {
	sub := strings.ToUpper(args[1])
	switch {
	case sub == "LOAD" && len(args) == 3:
		if sc := scriptBySource(args[2]); sc != nil {
			s.scripts[sc.sha] = true
			return Result{Val: sc.sha}
		}
		if s.lua() == nil {
			s.unmodelled("SCRIPT LOAD", fmt.Errorf("redissim: %s: a script the simulator does not model (sha1 %s)", s.name, ScriptSHA1(args[2])))
			return Result{Err: Error("ERR redissim: unknown script " + ScriptSHA1(args[2]))}
		}
		sha, err := s.load(args[2])
		if err != nil {
			return Result{Err: err}
		}
		return Result{Val: sha}
	case sub == "EXISTS" && len(args) >= 3:
		out := make([]any, len(args)-2)
		for i, sha := range args[2:] {
			sha = strings.ToLower(sha)
			_, lua := s.sources[sha]
			out[i] = int64(0)
			if lua || s.scripts[sha] {
				out[i] = int64(1)
			}
		}
		return Result{Val: out}
	case sub == "FLUSH" && len(args) <= 3:
		if len(args) == 3 && !strings.EqualFold(args[2], "ASYNC") && !strings.EqualFold(args[2], "SYNC") {
			return Result{Err: Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")}
		}
		s.scripts, s.sources = map[string]bool{}, map[string]string{}
		return Result{Val: "OK"}
	case sub == "LOAD" || sub == "EXISTS" || sub == "FLUSH":
		return Result{Err: Error(fmt.Sprintf("ERR unknown subcommand or wrong number of arguments for '%s'. Try SCRIPT HELP.", args[1]))}
	}
	s.unmodelled("SCRIPT "+sub, fmt.Errorf("redissim: %s: SCRIPT %s is not modelled", s.name, sub))
	return Result{Err: Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", args[1]))}
}

func splitKeys(args []string) (keys, argv []string, err error) {
	n, ok := integer(args[2])
	switch {
	case !ok:
		return nil, nil, errNotInteger
	case n < 0:
		return nil, nil, errNegNumKeys
	case n > int64(len(args)-3):
		return nil, nil, errNumKeys
	}
	return args[3 : 3+n], args[3+n:], nil
}

// runScript runs sc atomically (nothing else runs on the server
// meanwhile, and its clock does not move); an error of a command it calls
// ends it, as redis.call does, and is its error reply, as Redis 7 words
// it (but for the line number).
func runScript(s *server, sc *script, keys, argv []string) Result {
	res, err := sc.run(s, keys, argv)
	if err != nil {
		msg := err.Error()
		if _, ok := err.(Error); !ok {
			msg = "ERR user_script: " + msg
		}
		return Result{Err: Error(fmt.Sprintf("%s script: %s, on @user_script.", msg, sc.sha))}
	}
	return res
}

// call is redis.call: a command's result, its error reply an error; a
// missing argument (KEYS[i] or ARGV[i] beyond those given, nil in Lua) is
// an error too.
func call(s *server, args ...*string) (any, error) {
	strs := make([]string, len(args))
	for i, a := range args {
		if a == nil {
			return nil, fmt.Errorf("Lua redis lib command arguments must be strings or integers")
		}
		strs[i] = *a
	}
	r := s.exec(strs)
	return r.Val, r.Err
}

// at is KEYS[i] or ARGV[i] (from 1), nil when missing.
func at(xs []string, i int) *string {
	if i > len(xs) {
		return nil
	}
	return &xs[i-1]
}

func lit(s string) *string { return &s }

// eq is Lua's == between a reply and an argument: a missing key (false)
// or argument (nil) equals nothing.
func eq(v any, a *string) bool {
	s, ok := v.(string)
	return ok && a != nil && s == *a
}

func runAcquire(s *server, keys, argv []string) (Result, error) {
	v, err := call(s, lit("SET"), at(keys, 1), at(argv, 1), lit("NX"), lit("PX"), at(argv, 2))
	if err != nil {
		return Result{}, err
	}
	if v == nil {
		return Result{Val: int64(0)}, nil
	}
	n, err := call(s, lit("INCR"), at(keys, 2))
	return Result{Val: n}, err
}

func runRaise(s *server, keys, argv []string) (Result, error) {
	v, err := call(s, lit("GET"), at(keys, 1))
	if err != nil {
		return Result{}, err
	}
	cur := "0"
	if str, ok := v.(string); ok {
		cur = str
	}
	c, ok1 := tonumber(&cur)
	a, ok2 := tonumber(at(argv, 1))
	if !ok1 || !ok2 {
		return Result{}, fmt.Errorf("attempt to compare nil with number")
	}
	if c < a {
		if _, err := call(s, lit("SET"), at(keys, 1), at(argv, 1)); err != nil {
			return Result{}, err
		}
	}
	return Result{Val: int64(1)}, nil
}

// tonumber is Lua's tonumber on a string, for decimal numbers.
func tonumber(a *string) (float64, bool) {
	if a == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(*a), 64)
	return f, err == nil
}

func runRefresh(s *server, keys, argv []string) (Result, error) {
	v, err := call(s, lit("GET"), at(keys, 1))
	if err != nil {
		return Result{}, err
	}
	if !eq(v, at(argv, 1)) {
		return Result{Val: int64(0)}, nil
	}
	n, err := call(s, lit("PEXPIRE"), at(keys, 1), at(argv, 2))
	return Result{Val: n}, err
}

func runRefreshSetNX(s *server, keys, argv []string) (Result, error) {
	v, err := call(s, lit("GET"), at(keys, 1))
	if err != nil {
		return Result{}, err
	}
	if eq(v, at(argv, 1)) {
		n, err := call(s, lit("PEXPIRE"), at(keys, 1), at(argv, 2))
		return Result{Val: n}, err
	}
	if v == nil {
		set, err := call(s, lit("SET"), at(keys, 1), at(argv, 1), lit("NX"), lit("PX"), at(argv, 2))
		if err != nil {
			return Result{}, err
		}
		if set != nil {
			return Result{Val: int64(1)}, nil
		}
	}
	return Result{Val: int64(0)}, nil
}

func runRelease(s *server, keys, argv []string) (Result, error) {
	v, err := call(s, lit("GET"), at(keys, 1))
	if err != nil {
		return Result{}, err
	}
	if !eq(v, at(argv, 1)) {
		return Result{Val: int64(0)}, nil
	}
	n, err := call(s, lit("DEL"), at(keys, 1))
	return Result{Val: n}, err
}

func sortedStrings(xs []string) []string {
	slices.Sort(xs)
	return xs
}
