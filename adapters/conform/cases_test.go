package conform

import (
	"strings"
	"testing"
)

// SelectCases picks cases by the IDs part 1 prints, a parameterised case
// by its stem, each once, and names what picks nothing.
func TestSelectCases(t *testing.T) {
	got, err := SelectCases([]string{"1.1", " 7b", "7b T=1s", "9.2/9.3/9.4"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	want := "1.1|7b T=1s|7b T=2s|7b T=5s|7b T=10s|7b T=60s|7b T=0|9.2/9.3/9.4"
	if strings.Join(ids, "|") != want {
		t.Errorf("picked %q, want %s", ids, want)
	}
	for _, bad := range []string{"7", "9.2", "", "12.8x"} {
		if _, err := SelectCases([]string{"1.1", bad}); err == nil || !strings.Contains(err.Error(), `no case "`+bad+`"`) {
			t.Errorf("SelectCases(%q): %v, want an error naming it", bad, err)
		}
	}
}
