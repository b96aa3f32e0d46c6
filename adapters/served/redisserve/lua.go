package redisserve

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/lockprover/lockprover/sim/redissim"
)

// luaVM runs scripts as Redis 7.0 runs them (script_lua.c, eval.c), on
// gopher-lua (Lua 5.1, as Redis's): the base, table, string and math
// libraries, KEYS and ARGV, and the redis table (call, pcall,
// error_reply, status_reply, sha1hex, log, setresp for RESP2,
// set_repl and replicate_commands as no-ops). Each run gets a fresh
// state (Redis keeps one, but forbids scripts its globals), so no script
// sees another's; math.random is seeded the same every run, as Redis
// seeds it, so that a run depends only on its inputs. Values cross as
// Redis converts them: a command's integer reply is a number, a bulk a
// string, a nil false, an array a table, a status {ok=...}, an error
// {err=...} (raised by call, returned by pcall); the script's number is
// an integer reply (truncated), a string a bulk, true 1, false and nil a
// nil, a table an array up to its first nil, {ok=...} a status and
// {err=...} an error.
type luaVM struct {
	protos sync.Map // SHA1 -> *lua.FunctionProto
	// unserved names what a script asked that is not served.
	unserved func(what string)
}

// NewLua is the interpreter the served servers run scripts on, for a
// World not served on the wire that runs scripts redissim does not know
// natively (the differential's, adapters/conform/redisconform:
// w.Serve(redissim.Wire{Lua: redisserve.NewLua()})).
func NewLua() redissim.Lua { return &luaVM{} }

// chunk is the name Redis gives a script's source: its errors read
// user_script:LINE.
const chunk = "user_script"

func (v *luaVM) compile(src string) (*lua.FunctionProto, error) {
	sha := sha1hex(src)
	if p, ok := v.protos.Load(sha); ok {
		return p.(*lua.FunctionProto), nil
	}
	stmts, err := parse.Parse(strings.NewReader(src), chunk)
	if err != nil {
		return nil, redissim.Error("ERR Error compiling script (new function): " + firstLine(err.Error()))
	}
	p, err := lua.Compile(stmts, chunk)
	if err != nil {
		return nil, redissim.Error("ERR Error compiling script (new function): " + firstLine(err.Error()))
	}
	v.protos.Store(sha, p)
	return p, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Load is redissim.Lua's: src compiles.
func (v *luaVM) Load(src string) error {
	_, err := v.compile(src)
	return err
}

// Run is redissim.Lua's: src run with keys and argv, call running its
// commands on the server.
func (v *luaVM) Run(src string, keys, argv []string, call func([]string) redissim.Result) redissim.Result {
	p, err := v.compile(src)
	if err != nil {
		return redissim.Result{Err: err}
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true, MinimizeStackMemory: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, name := range []string{"dofile", "loadfile", "print"} {
		L.SetGlobal(name, lua.LNil)
	}
	seedRandom(L)
	L.SetGlobal("KEYS", strings2table(L, keys))
	L.SetGlobal("ARGV", strings2table(L, argv))
	L.SetGlobal("redis", v.redisTable(L, call))
	v.protectGlobals(L)
	sha := sha1hex(src)
	L.Push(L.NewFunctionFromProto(p))
	if err := L.PCall(0, 1, L.NewFunction(errorHandler)); err != nil {
		return redissim.Result{Err: scriptError(err, sha)}
	}
	ret := L.Get(-1)
	L.Pop(1)
	r := toReply(ret)
	if e, ok := r.(redissim.Error); ok {
		return redissim.Result{Err: e}
	}
	return redissim.Result{Val: r}
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func strings2table(L *lua.LState, xs []string) *lua.LTable {
	t := L.CreateTable(len(xs), 0)
	for _, x := range xs {
		t.Append(lua.LString(x))
	}
	return t
}

// errorHandler is Redis's: an error not a table becomes {err='ERR ' ..
// tostring(err)}, and the table gets the line of the script where it
// was raised.
func errorHandler(L *lua.LState) int {
	obj := L.Get(1)
	t, ok := obj.(*lua.LTable)
	if !ok {
		t = L.NewTable()
		t.RawSetString("err", lua.LString("ERR "+obj.String()))
	}
	for level := 0; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			break
		}
		if dbg.Source == chunk && dbg.CurrentLine > 0 {
			t.RawSetString("source", lua.LString("@"+chunk))
			t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
			break
		}
	}
	L.Push(t)
	return 1
}

// scriptError is the reply of a script that raised an error: its message,
// then where, as Redis 7.0 words it.
func scriptError(err error, sha string) redissim.Error {
	ae, ok := err.(*lua.ApiError)
	if !ok {
		return redissim.Error(fmt.Sprintf("ERR Error running script %s, %.100s", sha, err.Error()))
	}
	t, ok := ae.Object.(*lua.LTable)
	if !ok {
		return redissim.Error(fmt.Sprintf("ERR Error running script %s, %.100s", sha, ae.Object.String()))
	}
	msg := lua.LVAsString(t.RawGetString("err"))
	if line, ok := t.RawGetString("line").(lua.LNumber); ok {
		msg += fmt.Sprintf(" script: %s, on @%s:%d.", sha, chunk, int(line))
	}
	return redissim.Error(msg)
}

// redisTable is the script's redis.
func (v *luaVM) redisTable(L *lua.LState, call func([]string) redissim.Result) *lua.LTable {
	t := L.NewTable()
	for name, f := range map[string]lua.LGFunction{
		"call":  func(L *lua.LState) int { return v.luaCall(L, call, true) },
		"pcall": func(L *lua.LState) int { return v.luaCall(L, call, false) },
		"error_reply": func(L *lua.LState) int {
			L.Push(errorTable(L, "-"+L.CheckString(1)))
			return 1
		},
		"status_reply": func(L *lua.LState) int {
			s := L.NewTable()
			s.RawSetString("ok", lua.LString(L.CheckString(1)))
			L.Push(s)
			return 1
		},
		"sha1hex": func(L *lua.LState) int {
			L.Push(lua.LString(sha1hex(L.CheckString(1))))
			return 1
		},
		"log": func(L *lua.LState) int { return 0 },
		"setresp": func(L *lua.LState) int {
			if n := L.CheckInt(1); n != 2 {
				if v.unserved != nil {
					v.unserved(fmt.Sprintf("redis.setresp(%d)", n))
				}
				L.Error(errorTable(L, "RESP version must be 2, the one served"), 1)
			}
			return 0
		},
		"set_repl":           func(L *lua.LState) int { return 0 },
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
	} {
		t.RawSetString(name, L.NewFunction(f))
	}
	for name, n := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3} {
		t.RawSetString(name, lua.LNumber(n))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(Version))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(versionNum()))
	return t
}

// errorTable is luaPushErrorBuff's: "-CODE msg" keeps its code, a message
// without one gets ERR; {err="CODE msg"}.
func errorTable(L *lua.LState, e string) *lua.LTable {
	code, msg := "ERR", e
	if strings.HasPrefix(e, "-") {
		if i := strings.IndexByte(e, ' '); i >= 0 {
			code, msg = e[1:i], e[i+1:]
		} else {
			msg = e[1:]
		}
	}
	t := L.NewTable()
	t.RawSetString("err", lua.LString(code+" "+strings.TrimRight(msg, "\r\n")))
	return t
}

// luaCall is redis.call (raise) and redis.pcall.
func (v *luaVM) luaCall(L *lua.LState, call func([]string) redissim.Result, raise bool) int {
	fail := func(t *lua.LTable) int {
		if raise {
			L.Error(t, 1)
		}
		L.Push(t)
		return 1
	}
	n := L.GetTop()
	if n == 0 {
		return fail(errorTable(L, "Please specify at least one argument for this redis lib call"))
	}
	args := make([]string, n)
	for i := range n {
		switch x := L.Get(i + 1).(type) {
		case lua.LString:
			args[i] = string(x)
		case lua.LNumber:
			args[i] = strconv.FormatFloat(float64(x), 'g', 17, 64)
		default:
			return fail(errorTable(L, "Lua redis lib command arguments must be strings or integers"))
		}
	}
	if !scriptable(args[0]) {
		return fail(errorTable(L, "This Redis command is not allowed from script"))
	}
	if err := redissim.Queueable(args); err != nil {
		if strings.HasPrefix(err.Error(), "ERR unknown command") {
			if v.unserved != nil {
				v.unserved(strings.ToUpper(args[0]))
			}
			return fail(errorTable(L, "Unknown Redis command called from script"))
		}
		return fail(errorTable(L, "Wrong number of args calling Redis command from script"))
	}
	res := call(args)
	if res.Err != nil {
		return fail(errorTable(L, "-"+res.Err.Error()))
	}
	L.Push(toLua(L, shape(args, res.Val)))
	return 1
}

// scriptable is whether a script may call the command: Redis refuses
// those flagged noscript.
func scriptable(name string) bool {
	switch strings.ToUpper(name) {
	case "EVAL", "EVALSHA", "SCRIPT", "MULTI", "EXEC", "DISCARD", "WATCH", "SUBSCRIBE", "HELLO", "CLIENT":
		return false
	}
	return true
}

// toLua is a reply (shaped as the wire sends it) as Redis hands it to a
// script.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil, nullArray:
		return lua.LFalse
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case double:
		return lua.LString(v)
	case status:
		t := L.NewTable()
		t.RawSetString("ok", lua.LString(v))
		return t
	case error:
		return errorTable(L, "-"+v.Error())
	case []any:
		t := L.CreateTable(len(v), 0)
		for _, x := range v {
			t.Append(toLua(L, x))
		}
		return t
	case scored:
		return toLua(L, []any(v))
	}
	return lua.LFalse
}

// toReply is the script's value as Redis replies it.
func toReply(v lua.LValue) any {
	switch v := v.(type) {
	case lua.LString:
		return string(v)
	case lua.LBool:
		if v {
			return int64(1)
		}
		return nil
	case lua.LNumber:
		return int64(v)
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return redissim.Error(string(e))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return status(s)
		}
		out := []any{}
		for i := 1; ; i++ {
			x := v.RawGetInt(i)
			if x == lua.LNil {
				break
			}
			out = append(out, toReply(x))
		}
		return out
	}
	return nil
}

// protectGlobals makes the globals read-only, as Redis 7.0 does: a
// script that sets one, or reads one that does not exist, fails as there
// (Redis's libraries cjson, bit, struct and cmsgpack, not served, are
// named).
func (v *luaVM) protectGlobals(L *lua.LState) {
	mt := L.NewTable()
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		name := L.CheckAny(2).String()
		switch name {
		case "cjson", "bit", "struct", "cmsgpack":
			if v.unserved != nil {
				v.unserved("Lua library " + name)
			}
		}
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", name)
		return 0
	}))
	L.SetMetatable(L.Get(lua.GlobalsIndex), mt)
}

// seedRandom makes math.random and math.randomseed Redis's kind: the
// same sequence every run (a 48-bit linear congruential generator, as
// Redis's rand48, seeded 0).
func seedRandom(L *lua.LState) {
	var x uint64
	next := func() float64 {
		x = (0x5DEECE66D*x + 0xB) & (1<<48 - 1)
		return float64(x) / float64(uint64(1)<<48)
	}
	m := L.GetGlobal("math").(*lua.LTable)
	m.RawSetString("randomseed", L.NewFunction(func(L *lua.LState) int {
		x = uint64(L.CheckInt64(1))
		return 0
	}))
	m.RawSetString("random", L.NewFunction(func(L *lua.LState) int {
		r := next()
		switch L.GetTop() {
		case 0:
			L.Push(lua.LNumber(r))
		case 1:
			L.Push(lua.LNumber(int64(r*float64(L.CheckInt64(1))) + 1))
		default:
			lo, hi := L.CheckInt64(1), L.CheckInt64(2)
			L.Push(lua.LNumber(lo + int64(r*float64(hi-lo+1))))
		}
		return 1
	}))
}
