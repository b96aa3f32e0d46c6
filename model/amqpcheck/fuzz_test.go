package amqpcheck

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// FuzzCheck: whatever history the reader accepts, Check returns verdicts
// and never panics.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "histories", "*.jsonl"))
	for _, path := range files {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := histories.Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for _, strict := range []bool{false, true} {
			r := model.Check(h, model.Options{Family: []any{Options{Strict: strict}}, Timeout: time.Second})
			for _, v := range r.Verdicts {
				if v.Status == verdict.Fail && v.Detail == "" {
					t.Errorf("%s failed without saying why", v.Property)
				}
			}
		}
	})
}
