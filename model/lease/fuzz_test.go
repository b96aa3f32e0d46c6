package lease_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// FuzzCheck checks that whatever history the reader accepts, judging it
// never panics and names every lock.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "histories", "1[0-4]*-lease-*.jsonl"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := histories.Read(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			return
		}
		for _, o := range []model.Options{{}, {Family: []any{lease.Options{Drift: 0.5}}}} {
			for _, v := range model.Check(h, o).Verdicts {
				if v.Lock == "" {
					t.Fatalf("a verdict names no lock: %+v", v)
				}
			}
		}
	})
}
