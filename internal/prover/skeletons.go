package prover

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// What every family's Skeletons share: the faults and the mutant a scope
// names, the plans of every choice of the clients' scripts, each with
// every subset of its faults' places, and the end of the scope in words.
// What the families vary (their scripts' alphabet, the variants of each
// choice, where a fault can strike) they pass in.

// PlanFaults is the faults a scope's plans may hold: s.Faults, or the
// family's (family: its --faults, as its setup read them) where s names
// none, those that keep keeps (every one, keep nil); none where s allows
// no fault (MaxFaults 0).
func (s ExhaustScope) PlanFaults(family []string, keep func(fault string) bool) []string {
	if s.MaxFaults <= 0 {
		return nil
	}
	asked := s.Faults
	if asked == nil {
		asked = family
	}
	var out []string
	for _, f := range asked {
		if keep == nil || keep(f) {
			out = append(out, f)
		}
	}
	return out
}

// PlanMutant is the mutant a scope's plans prove: s.Mutant, or the
// family's (its --mutant) where s names none; "" for the reference.
func (s ExhaustScope) PlanMutant(family string) string {
	return cmp.Or(s.Mutant, family)
}

// EveryPlan is every plan of a scope, fewest operations and faults first
// (by size; plans of one size keep their order): for each choice of the
// clients' scripts (ClientScripts), and for each of variants, the plans
// that plans makes of them (a skeleton with each subset of its faults:
// WithFaults). The variants are what a family varies beside the clients'
// scripts (their limits, their priorities, the admins' scripts); one nil
// variant where it varies nothing.
func EveryPlan[S, V any](scripts [][][]S, variants []V, plans func(clients [][]S, v V) ([]Plan, error), size func(Plan) int) ([]Plan, error) {
	var out []Plan
	for _, cs := range scripts {
		for _, v := range variants {
			ps, err := plans(cs, v)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
	}
	slices.SortStableFunc(out, func(a, b Plan) int { return size(a) - size(b) })
	return out, nil
}

// WithFaults is the plans of one skeleton: the plan with makes of each
// subset of at most most of places, the faults it can hold, in the order
// of Subsets (no fault first).
func WithFaults[F any](places []F, most int, with func(nemesis []F) Plan) []Plan {
	subsets := Subsets(places, most)
	out := make([]Plan, 0, len(subsets))
	for _, nem := range subsets {
		out = append(out, with(nem))
	}
	return out
}

// EndWords ends a scope in words as every family's do: its faults, at
// most s.MaxFaults of faults, each where where says ("no faults" if
// none), its mutant if any, and how many plans it holds.
func (s ExhaustScope) EndWords(faults []string, where, mutant string, plans int) string {
	w := "; no faults"
	if len(faults) > 0 {
		w = fmt.Sprintf("; 0 to %d faults of %s, each %s", s.MaxFaults, strings.Join(faults, ", "), where)
	}
	if mutant != "" {
		w += "; mutant " + mutant
	}
	return w + fmt.Sprintf(" (%d plans), under every schedule of the simulator", plans)
}
