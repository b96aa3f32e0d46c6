package serverversion

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/family"
)

func settings(value string) family.Settings {
	return family.Settings{Flag: func(name string) string {
		if name == "server-version" {
			return value
		}
		return ""
	}}
}

// Parse reads a version of the target's servers, the default for none,
// and refuses an unknown one as bad input naming every choice.
func TestParse(t *testing.T) {
	if v, err := Parse(settings("valkey-9.1.2"), "redis", "valkey"); err != nil || v.Server != "valkey" || v.Name != "9.1.2" {
		t.Errorf("valkey-9.1.2: %v, %v", v, err)
	}
	if v, err := Parse(settings(""), "postgresql"); err != nil || !v.Default {
		t.Errorf("no value: %v, %v; want the default", v, err)
	}
	_, err := Parse(settings("9.9"), "postgresql")
	var usage *family.UsageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--server-version") || !strings.Contains(err.Error(), "18") {
		t.Errorf("9.9: %v; want a usage error listing the versions", err)
	}
}

// Have needs nothing for the machine's own version, and refuses a built
// version whose binary is not in the cache as bad input saying how to
// build it.
func TestHave(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	own, err := versions.Lookup("postgresql", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := Have(context.Background(), own, nil); err != nil {
		t.Errorf("the machine's own %v: %v", own, err)
	}
	v, err := versions.Lookup("consul", "1.20.2")
	if err != nil {
		t.Fatal(err)
	}
	err = Have(context.Background(), v, nil)
	var usage *family.UsageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), ".ci/consul 1.20.2") {
		t.Errorf("an unbuilt %v: %v; want a usage error naming .ci/consul 1.20.2", v, err)
	}
	// Built, it is had.
	bin := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "lockprover", "consul-v1.20.2", "consul")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Have(context.Background(), v, nil); err != nil {
		t.Errorf("a built %v: %v", v, err)
	}
}

// Choices lists a target's versions with its default, the machine's own;
// PrivateWhere names the version only when the flag named one.
func TestChoicesAndWhere(t *testing.T) {
	if got, want := Choices("postgresql", "postgresql"), "15, 17, 18 (default: 15, the machine's postgresql; "+Others+")"; got != want {
		t.Errorf("Choices: %q, want %q", got, want)
	}
	if got := Choices("redis-server", "redis", "valkey"); !strings.HasPrefix(got, "7.0.15, 8.0.2, 8.0.6, valkey-8.1.1, valkey-9.1.2 (default: 7.0.15,") {
		t.Errorf("Choices of redis and valkey: %q", got)
	}
	v, err := versions.Lookup("postgresql", "18")
	if err != nil {
		t.Fatal(err)
	}
	if got := PrivateWhere(settings(""), "PostgreSQL", v); got != "a private PostgreSQL of the run's own" {
		t.Errorf("without the flag: %q", got)
	}
	if got, want := PrivateWhere(settings("18"), "PostgreSQL", v), "a private PostgreSQL 18 of the run's own (Debian sid's postgresql-18 "+v.Debian+")"; got != want {
		t.Errorf("with 18: %q, want %q", got, want)
	}
	if f := Flag(family.Server, "x"); f.Name != "server-version" || f.Verbs != family.Server || f.Usage != Summary+"\n; x" || !f.Real {
		t.Errorf("Flag: %+v", f)
	}
}
