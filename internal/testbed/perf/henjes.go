package perf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/testbed/systems"
)

// HenjesResult is case 8, Henjes07 §4.5's experiment on one broker of
// each system: received messages/s as a function of the filters installed
// and the replication grade, with the model B = t_rcv + n_fltr·t_fltr +
// r·t_tx fitted to each system's points.
type HenjesResult struct {
	NonMatching []int `json:"non_matching_filters"`
	Replication []int `json:"replication_grades"`
	// Points are each system's measurements, by system.
	Points map[string][]HenjesMeasured `json:"points"`
	// Models are fitted to each system's points; ModelErrors say why a
	// fit failed.
	Models      map[string]HenjesModel `json:"models"`
	ModelErrors map[string]string      `json:"model_errors,omitempty"`
	// Published is Henjes07's own fit for ActiveMQ 4.0 (2007 hardware),
	// drawn for reference.
	Published HenjesModel `json:"henjes07_published"`
}

// HenjesMeasured is one point of one system.
type HenjesMeasured struct {
	NonMatching int `json:"non_matching"`
	R           int `json:"r"`
	// Filters is n_fltr, every filter installed: NonMatching + R.
	Filters int `json:"filters"`
	// Received is the median over the repetitions of the messages/s the
	// broker took in and passed on: deliveries/s ÷ r.
	Received Num   `json:"received_per_s"`
	Reps     []Num `json:"received_repetitions"`
	// Overall is Henjes07's overall throughput, received + dispatched:
	// Received·(r+1).
	Overall     Num `json:"overall_per_s"`
	ServerCores Num `json:"server_cores"`
	// Model is what the system's fitted model predicts here.
	Model Num `json:"model_per_s"`
}

func henjesVariant(add, r int) string { return fmt.Sprintf("non-matching=%d r=%d", add, r) }

// caseHenjes is case 8. Publishers send the plain stream (class = 0); r
// subscribers select class = 0, and the non-matching filters are inert
// filters (one subscription each) that share the messages' attributes, so
// that no system can reject them by a name the message lacks. The filters
// grow from one level to the next; at each level every replication grade
// runs, the systems interleaved.
func (h *harness) caseHenjes(ctx context.Context, cr *CaseResult) (err error) {
	if err := systems.NewActiveMQ(systems.ActiveMQOptions{}).Available(); err != nil {
		return &skipError{why: err.Error()}
	}
	var ts []*target
	var sets []*inertSet
	defer func() {
		for _, s := range sets {
			err = errors.Join(err, s.close())
		}
		err = errors.Join(err, closeAll(ts...))
	}()
	for _, s := range []string{sysDrip, sysActiveMQ} {
		t, err := h.deploy(ctx, s, s, 1, manyStreamsArgs...)
		if err != nil {
			return err
		}
		ts = append(ts, t)
		sets = append(sets, newInertSet(t))
	}
	record(cr, ts...)
	cr.Systems = []string{sysDrip, sysActiveMQ}
	levels := slices.Compact(slices.Sorted(slices.Values(h.cfg.HenjesFilters)))
	grades := slices.Compact(slices.Sorted(slices.Values(h.cfg.HenjesReplication)))
	res := &HenjesResult{NonMatching: levels, Replication: grades, Points: map[string][]HenjesMeasured{},
		Models: map[string]HenjesModel{}, ModelErrors: map[string]string{}, Published: Henjes07Published}
	cr.Henjes = res
	for _, add := range levels {
		for i, s := range sets {
			began := time.Now()
			if err := s.grow(ctx, add); err != nil {
				return err
			}
			h.progress("  %s: %d non-matching filters installed (%v)", ts[i].name, add, time.Since(began).Round(time.Millisecond))
		}
		for _, r := range grades {
			plan := func(t *target) runPlan {
				p := h.plainPlan(t, classPredicate, r, 0, false, h.cfg.HenjesWarmup, h.cfg.HenjesDuration, h.cfg.HenjesDrain)
				p.variant = henjesVariant(add, r)
				p.window = uint64(h.cfg.HenjesWindow)
				return p
			}
			if err := h.interleave(ctx, cr, h.cfg.Reps, ts, plan); err != nil {
				return err
			}
		}
	}
	for _, t := range ts {
		var pts []HenjesPoint
		for _, add := range levels {
			for _, r := range grades {
				m := henjesPoint(cr.Runs, t.name, add, r)
				res.Points[t.name] = append(res.Points[t.name], m)
				pts = append(pts, HenjesPoint{Filters: float64(m.Filters), R: float64(r), Received: float64(m.Received)})
			}
		}
		model, err := FitHenjes(pts)
		if err != nil {
			res.ModelErrors[t.name] = err.Error()
			continue
		}
		res.Models[t.name] = model
		for i, p := range res.Points[t.name] {
			res.Points[t.name][i].Model = Num(model.Received(float64(p.Filters), float64(p.R)))
		}
	}
	top := levels[len(levels)-1]
	for _, r := range grades {
		row := makeRow(cr.Runs, receivedMetric(r), sysDrip, sysActiveMQ, henjesVariant(top, r), atLeast("≥ 10", 10))
		row.Metric = fmt.Sprintf("received msg/s, %d non-matching filters, r = %d", top, r)
		cr.Rows = append(cr.Rows, row)
	}
	for _, r := range grades[:1] {
		for _, add := range levels[:len(levels)-1] {
			row := makeRow(cr.Runs, receivedMetric(r), sysDrip, sysActiveMQ, henjesVariant(add, r), nil)
			row.Metric = fmt.Sprintf("received msg/s, %d non-matching filters, r = %d", add, r)
			cr.Rows = append(cr.Rows, row)
		}
	}
	for _, t := range ts {
		if m, ok := res.Models[t.name]; ok {
			cr.Notes = append(cr.Notes, fmt.Sprintf("%s fitted: t_rcv = %s, t_fltr = %s, t_tx = %s.", t.name, seconds(m.TRcv), seconds(m.TFltr), seconds(m.TTx)))
		}
	}
	return nil
}

// receivedMetric is Henjes07's received throughput: deliveries/s ÷ r.
func receivedMetric(r int) metric {
	return metric{name: "received msg/s", unit: "rate", get: func(run RunResult) float64 { return float64(run.DeliveryRate) / float64(r) }}
}

// henjesPoint summarises one system's runs at one point.
func henjesPoint(runs []RunResult, system string, add, r int) HenjesMeasured {
	v := henjesVariant(add, r)
	rec := valuesOf(runs, system, v, receivedMetric(r))
	received := Median(rec)
	return HenjesMeasured{
		NonMatching: add, R: r, Filters: add + r,
		Received: Num(received), Reps: nums(rec), Overall: Num(received * float64(r+1)),
		ServerCores: Num(Median(valuesOf(runs, system, v, mCores))), Model: Num(math.NaN()),
	}
}

// seconds prints a duration in seconds with the unit that suits it.
func seconds(s float64) string {
	switch a := math.Abs(s); {
	case a >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	case a >= 1e-6:
		return fmt.Sprintf("%.3g µs", s*1e6)
	default:
		return fmt.Sprintf("%.3g ns", s*1e9)
	}
}
