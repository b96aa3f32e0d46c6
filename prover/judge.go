package prover

import "github.com/lockprover/lockprover/model"

// Judge checks a run: its history, and what the history cannot show
// (no-leak, the efficiency properties, the processes' failures) from the
// run's evidence. model.Check assembles every verdict.
func Judge(p *Plan, res *Result, o model.Options) *model.Report {
	o.Evidence = &model.Evidence{Lock: res.Lock, Costs: res.Costs, Waste: res.Waste, Methods: res.Methods,
		Leaks: res.Leaks, MaxSlots: res.MaxSlots, Problems: res.Problems}
	return model.Check(res.History, o)
}
