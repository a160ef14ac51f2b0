package tasks

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/probformer/probformer/em"
	"github.com/probformer/probformer/graph"
)

// priorFields are em's per-head prior parameters in the order printed,
// with their headings: the hyperparameters of em/MATH.md §4–§5 and the
// initial precisions.
var priorFields = []struct{ field, heading string }{
	{"theta_xi", "θ_ξ"}, {"a_alpha", "a_α"}, {"b_alpha", "b_α"},
	{"theta_mu", "θ_μ"}, {"a_beta", "a_β"}, {"b_beta", "b_β"}, {"theta_pi", "θ_π"},
	{"alpha0", "α⁰"}, {"beta0", "β⁰"},
}

// printPriors prints the prior hyperparameters of every EM attention
// layer in params, per head, after the positivity transforms of
// em/MATH.md §6 (em.RawParams.LayerHyperparams), with a row of the values
// each head started from, init (em.DefaultRawParams(d) unless the model
// chose its own). A layer is
// found by its α⁰ parameter, which every EM layer has; parameters a
// layer's configuration does not use show as "—". The table follows a
// blank line; without EM layers nothing is printed.
func printPriors(w io.Writer, params *graph.Params, init em.RawParams) error {
	const suffix = ".em.alpha0"
	var names []string
	for _, p := range params.List() {
		if name, ok := strings.CutSuffix(p.Name, suffix); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nEM prior hyperparameters (em/MATH.md §6), initial and learned per head:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "layer\thead\t")
	for _, f := range priorFields {
		fmt.Fprintf(tw, "%s\t", f.heading)
	}
	fmt.Fprintln(tw)
	for _, name := range names {
		raw := map[string][]float64{}
		heads := 0
		for _, f := range priorFields {
			if p := params.Lookup(em.ParamName(name, f.field)); p != nil {
				raw[f.field] = p.Values()
				heads = len(raw[f.field])
			}
		}
		for _, f := range priorFields {
			if v, ok := raw[f.field]; ok && len(v) != heads {
				return fmt.Errorf("priors of %s: %s has %d heads, α⁰ has %d", name, f.field, len(v), heads)
			}
		}
		printPriorRow(tw, name, "initial", raw, -1, init)
		for h := range heads {
			printPriorRow(tw, name, fmt.Sprint(h), raw, h, init)
		}
	}
	return tw.Flush()
}

// printPriorRow prints one row: head h's transformed priors, or, for
// h < 0, the initial ones.
func printPriorRow(w io.Writer, layer, head string, raw map[string][]float64, h int, init em.RawParams) {
	r := init
	if h >= 0 {
		set := map[string]*float64{
			"theta_xi": &r.ThetaXi, "a_alpha": &r.AAlpha, "b_alpha": &r.BAlpha,
			"theta_mu": &r.ThetaMu, "a_beta": &r.ABeta, "b_beta": &r.BBeta, "theta_pi": &r.ThetaPi,
			"alpha0": &r.Alpha0, "beta0": &r.Beta0,
		}
		for field, v := range raw {
			*set[field] = v[h]
		}
	}
	hp, alpha0, beta0 := r.LayerHyperparams()
	values := map[string]float64{
		"theta_xi": hp.ThetaXi, "a_alpha": hp.AAlpha, "b_alpha": hp.BAlpha,
		"theta_mu": hp.ThetaMu, "a_beta": hp.ABeta, "b_beta": hp.BBeta, "theta_pi": hp.ThetaPi,
		"alpha0": alpha0, "beta0": beta0,
	}
	fmt.Fprintf(w, "%s\t%s\t", layer, head)
	for _, f := range priorFields {
		if _, used := raw[f.field]; !used {
			fmt.Fprint(w, "—\t")
			continue
		}
		fmt.Fprintf(w, "%.4g\t", values[f.field])
	}
	fmt.Fprintln(w)
}
