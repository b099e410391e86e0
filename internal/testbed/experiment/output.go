package experiment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Save writes under dir, for results[i] the results of scenario i on each
// system, SCENARIO-SYSTEM.json (the result, configuration embedded) and
// then the plots of Plot. It returns the paths written.
func Save(dir, name string, results [][]*Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, row := range results {
		for _, r := range row {
			f := filepath.Join(dir, r.Scenario.Name+"-"+r.System.System+".json")
			if err := r.WriteJSON(f); err != nil {
				return files, fmt.Errorf("writing %s: %w", f, err)
			}
			files = append(files, f)
		}
	}
	plots, err := Plot(dir, name, results)
	return append(files, plots...), err
}

// Plot writes under dir, for results[i] the results of scenario i on each
// system:
//
//	SCENARIO-SYSTEM.png    rates over time with the busiest link (PlotRun)
//	SCENARIO-compare.png   throughput against input rate, all systems (PlotCompare)
//
// and, when name is a group of several scenarios, NAME-grid.png (PlotGrid)
// and NAME-links.png (PlotLinks); when the results hold runs of the scale
// sweeps, NAME-fig7-SYSTEM.png (PlotSweeps). It returns the paths written.
func Plot(dir, name string, results [][]*Result) ([]string, error) {
	var files []string
	add := func(f string, err error) error {
		if err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
		files = append(files, f)
		return nil
	}
	for _, row := range results {
		if len(row) == 0 {
			continue
		}
		for _, r := range row {
			f := filepath.Join(dir, r.Scenario.Name+"-"+r.System.System+".png")
			if err := add(f, PlotRun(r, f)); err != nil {
				return files, err
			}
		}
		f := filepath.Join(dir, row[0].Scenario.Name+"-compare.png")
		if err := add(f, PlotCompare(row, f)); err != nil {
			return files, err
		}
	}
	if len(results) > 1 {
		f := filepath.Join(dir, name+"-grid.png")
		if err := add(f, PlotGrid(results, f)); err != nil {
			return files, err
		}
		f = filepath.Join(dir, name+"-links.png")
		if err := add(f, PlotLinks(results, f)); err != nil {
			return files, err
		}
	}
	sweeps, err := plotSweeps(dir, name, results)
	return append(files, sweeps...), err
}

// Load reads back what Save wrote in dir for the scenarios of name (a
// scenario or a group) and the given systems, in that order. Missing files
// are left out; a scenario with none is an error.
func Load(dir, name string, systems []string) ([][]*Result, error) {
	scenarios, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	var out [][]*Result
	for _, sc := range scenarios {
		var row []*Result
		for _, sys := range systems {
			r, err := ReadResult(filepath.Join(dir, sc.Name+"-"+sys+".json"))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if r.Error == "" {
				// Derived from the series: recomputed, so results
				// written before a summary field existed gain it.
				r.Summary = summarise(r)
			}
			row = append(row, r)
		}
		if len(row) == 0 {
			return nil, fmt.Errorf("no results for scenario %s in %s", sc.Name, dir)
		}
		out = append(out, row)
	}
	return out, nil
}
