// Package serverversion is --server-version as every family's descriptor
// reads it: the version a real target's private servers run
// (adapters/servers/versions), and the making of what that version needs (a
// Debian release's root, lockprover's build of a binary), with what
// cannot be had refused as bad input (exit 2) saying how to get it.
package serverversion

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/family"
)

// Parse reads s's --server-version for a target that runs servers (its
// own first, then any other it also runs: redis, then valkey): "" is the
// first's default; an unknown value is a *family.UsageError listing every
// version the target takes.
func Parse(s family.Settings, servers ...string) (versions.Version, error) {
	v, err := versions.Parse(s.Flag("server-version"), servers...)
	if err != nil {
		return v, family.Usagef("--server-version: %v", err)
	}
	return v, nil
}

// Have makes v's root where v runs from one and it is not made yet (some
// minutes, once per machine, its steps told to log, which may be nil), or
// finds lockprover's build of it: a version that cannot be had here is a
// *family.UsageError saying what is missing and how to get it. The
// machine's own version needs nothing.
func Have(ctx context.Context, v versions.Version, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	var err error
	switch {
	case v.Rooted():
		_, err = v.Root(ctx, log)
	case v.Built():
		_, err = v.Binary()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, debroot.ErrUnavailable):
		return family.Usagef("--server-version: %s cannot be had here: %v", v, err)
	}
	return fmt.Errorf("--server-version: %s: %w", v, err)
}
