package congestion

import (
	"fmt"
	"time"

	cc "github.com/dripmesh/drip/internal/congestion"
)

// Finding is one quantity of the paper read from a run, and the target
// the issue sets for it when there is one.
type Finding struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Target says what value meets it ("≥ 20"); Met whether this one
	// does. Empty and absent when the quantity is only reported.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s = %.3g", f.Name, f.Value)
	if f.Met != nil {
		verdict := "met"
		if !*f.Met {
			verdict = "MISSED"
		}
		s += fmt.Sprintf(" (target %s: %s)", f.Target, verdict)
	}
	return s
}

func report(name string, v float64) Finding { return Finding{Name: name, Value: v} }

func atLeast(name string, v, target float64) Finding {
	met := v >= target
	return Finding{Name: name, Value: v, Target: fmt.Sprintf("≥ %g", target), Met: &met}
}

func atMost(name string, v, target float64) Finding {
	met := v <= target
	return Finding{Name: name, Value: v, Target: fmt.Sprintf("≤ %g", target), Met: &met}
}

// tcpWire is the bytes a bulk TCP flow puts on the link per byte it
// delivers: 52 bytes of IPv4 and TCP headers (with timestamps) per 1448.
const tcpWire = 1500.0 / 1448

// Analyse reads the scenario's quantities from r (Malekpour11 §IV,
// issue 13's targets).
func Analyse(r *Result) []Finding {
	off, on := r.variant(false), r.variant(true)
	var out []Finding
	switch r.Scenario.Name {
	case Fig7:
		out = fig7(r, off, on)
	case Fig8:
		out = fig8(r, off, on)
	case Fig9:
		for _, v := range []*VariantResult{off, on} {
			out = append(out, fig9(r, v)...)
		}
	case Fig10:
		for _, v := range []*VariantResult{off, on} {
			out = append(out, fig10(r, v)...)
		}
	case IVE:
		out = ive4(r, off, on)
	}
	return out
}

// variant is the drip run with or without control, or nil.
func (r *Result) variant(control bool) *VariantResult {
	for i, v := range r.Variants {
		if !v.Variant.peer() && v.Variant.Control == control {
			return &r.Variants[i]
		}
	}
	return nil
}

// peers are the runs of other systems, in run order.
func (r *Result) peers() []*VariantResult {
	var out []*VariantResult
	for i, v := range r.Variants {
		if v.Variant.peer() {
			out = append(out, &r.Variants[i])
		}
	}
	return out
}

func (r *Result) bins(d time.Duration) int { return int(d / r.Config.Bin) }

func fig7(r *Result, off, on *VariantResult) []Finding {
	var out []Finding
	for _, v := range r.Variants {
		g := v.Groups[0]
		out = append(out, report(v.Variant.Name+": lost", float64(g.Lost)), report(v.Variant.Name+": delivered", float64(g.Delivered)))
	}
	if off == nil || on == nil {
		return out
	}
	return append(out,
		atLeast("losses without control / with control", LossReduction(off.Groups[0].Lost, on.Groups[0].Lost), 20),
		atLeast("deliveries with control / without", ratio(on.Groups[0].Delivered, off.Groups[0].Delivered), 0.95))
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// phases are the bottleneck's steps as bin ranges [from, to).
func (r *Result) phases() [][2]int {
	var out [][2]int
	steps := r.Scenario.Steps
	for i, st := range steps {
		end := r.Scenario.Length()
		if i+1 < len(steps) {
			end = steps[i+1].At
		}
		out = append(out, [2]int{r.bins(st.At), r.bins(end)})
	}
	return out
}

// fig8: after each change of the bottleneck, how long the publisher's
// sending rate (smoothed over a second) takes to come within 10% of what
// the subscriber receives in the second half of the phase, and the loss
// that persists there.
func fig8(r *Result, off, on *VariantResult) []Finding {
	var out []Finding
	sec := r.bins(time.Second)
	for k, ph := range r.phases() {
		kb := r.Scenario.Steps[k].Bandwidth * 8 / 1000
		for _, v := range append([]*VariantResult{off, on}, r.peers()...) {
			if v == nil {
				continue
			}
			g := v.Groups[0]
			half := (ph[0] + ph[1]) / 2
			loss := Mean(g.LostPerBin, half, ph[1]) / max(Mean(g.Sent, half, ph[1]), 1e-9)
			name := fmt.Sprintf("%s: phase %d (%.0f kbit/s)", v.Variant.Name, k+1, kb)
			out = append(out, report(name+": received msg/s", Mean(g.Arrived, half, ph[1])))
			if !v.Variant.Control {
				out = append(out, report(name+": loss rate, second half", loss))
				continue
			}
			out = append(out, atMost(name+": loss rate, second half", loss, 0.01))
			if k == 0 {
				continue
			}
			target := Median(g.Arrived, half, ph[1])
			t, ok := AdaptationTime(Smooth(g.Sent, sec), r.Config.Bin, ph[0], target, 0.1, sec)
			if !ok {
				t = time.Duration(ph[1]-ph[0]) * r.Config.Bin
			}
			out = append(out, atMost(name+": adaptation time (s)", t.Seconds(), 2))
		}
	}
	return out
}

// fig9: in the second half of each phase, Jain's index of the pairs'
// received rates against the max-min fair shares of what the bottleneck
// carried for them in all.
func fig9(r *Result, v *VariantResult) []Finding {
	if v == nil {
		return nil
	}
	var out []Finding
	for k, ph := range r.phases() {
		half := (ph[0] + ph[1]) / 2
		var rates, demands []float64
		total := 0.0
		for i, g := range v.Groups {
			x := Mean(g.Arrived, half, ph[1])
			rates = append(rates, x)
			total += x
			sp := r.Scenario.Subscribers[i]
			mid := r.Scenario.Steps[k].At + time.Duration(ph[1]-ph[0])*r.Config.Bin/2
			demands = append(demands, r.Scenario.Publishers[sp.Publishers[0]].Schedule.Rate(mid)*float64(sp.KTo-sp.KFrom)/100)
		}
		shares := cc.MaxMin(total, demands)
		name := fmt.Sprintf("%s: phase %d (%.0f kbit/s)", v.Variant.Name, k+1, r.Scenario.Steps[k].Bandwidth*8/1000)
		for i, g := range v.Groups {
			out = append(out, report(fmt.Sprintf("%s: %s received msg/s (max-min share %.0f)", name, g.Group, shares[i]), rates[i]))
		}
		loss := 0.0
		for _, g := range v.Groups {
			loss += Mean(g.LostPerBin, half, ph[1])
		}
		out = append(out, report(name+": lost msg/s", loss))
		j := report(name+": Jain's index", Jain(rates, shares))
		if v.Variant.Control {
			j = atLeast(j.Name, j.Value, 0.95)
		}
		out = append(out, j)
	}
	return out
}

// fig10: once the TCP flow runs (from 2 s after its start to the end),
// each flow's share of the bottleneck against half of it, and how soon the
// content flow's sending rate settles after the TCP flow starts.
func fig10(r *Result, v *VariantResult) []Finding {
	if v == nil || len(v.TCP) == 0 || len(v.Bottleneck) == 0 {
		return nil
	}
	from, to := r.bins(r.Scenario.TCPFrom+2*time.Second), r.bins(r.Scenario.Length())
	fair := r.Scenario.Steps[0].Bandwidth / 2
	tcp := Mean(v.TCP, from, to) * tcpWire
	content := Mean(v.Bottleneck, from, to) - tcp
	name := v.Variant.Name
	out := []Finding{report(name+": TCP, kbit/s on the link", tcp*8/1000), report(name+": content flow, kbit/s on the link", content*8/1000)}
	if !v.Variant.Control {
		return append(out, report(name+": TCP / fair share", tcp/fair), report(name+": content / fair share", content/fair))
	}
	out = append(out, atMost(name+": |TCP / fair share − 1|", abs(tcp/fair-1), 0.1), atMost(name+": |content / fair share − 1|", abs(content/fair-1), 0.1))
	sec := r.bins(time.Second)
	g := v.Groups[0]
	start := r.bins(r.Scenario.TCPFrom)
	target := Median(g.Arrived, (start+to)/2, to)
	t, ok := AdaptationTime(Smooth(g.Sent, sec), r.Config.Bin, start, target, 0.1, sec)
	if !ok {
		t = time.Duration(to-start) * r.Config.Bin
	}
	return append(out, atMost(name+": adaptation time after the TCP flow starts (s)", t.Seconds(), 2))
}

func abs(x float64) float64 { return max(x, -x) }

// ive4: §IV-E: the deliveries missed behind the bottleneck after the first
// 3 s, the throughput with control against without, the bottleneck's use
// and what control cost.
func ive4(r *Result, off, on *VariantResult) []Finding {
	var out []Finding
	from, to := r.bins(3*time.Second), r.bins(r.Scenario.Length())
	bw := r.Scenario.Steps[0].Bandwidth
	for _, v := range []*VariantResult{off, on} {
		if v == nil {
			continue
		}
		name := v.Variant.Name
		var missed, expected float64
		var delivered uint64
		for _, g := range v.Groups {
			missed += Mean(g.LostPerBin, from, to)
			expected += Mean(g.Sent, from, to)
			delivered += g.Delivered
			out = append(out, report(fmt.Sprintf("%s: %s: delay p50 (ms)", name, g.Group), g.P50))
		}
		m := report(name+": missed deliveries after 3 s (fraction)", missed/max(expected, 1e-9))
		if v.Variant.Control {
			m = atMost(m.Name, m.Value, 0.01)
		}
		out = append(out, m, report(name+": deliveries", float64(delivered)))
		if len(v.Bottleneck) > 0 {
			out = append(out, report(name+": bottleneck use after 3 s", Mean(v.Bottleneck, from, to)/bw))
		}
		if v.Variant.Control {
			var flows, feedback int
			for _, p := range v.Publishers {
				flows += p.Flows
				feedback += int(p.Feedback)
			}
			out = append(out, report(name+": limited flows at the publishers (end)", float64(flows)),
				report(name+": feedback messages per second at the publishers", float64(feedback)/r.Scenario.Length().Seconds()))
		}
	}
	if off != nil && on != nil {
		var a, b uint64
		for i := range on.Groups {
			a, b = a+on.Groups[i].Delivered, b+off.Groups[i].Delivered
		}
		out = append(out, atLeast("deliveries with control / without", ratio(a, b), 0.9))
	}
	return out
}
