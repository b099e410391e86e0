package churn

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Save writes under dir, for each result, SCENARIO.json and SCENARIO.png,
// and for all of them summary.json (a Summary each, with the command that
// produced them) and, with more than one, all.png (PlotAll). It returns
// the paths written.
func Save(dir, command string, rs []*Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	add := func(f string, err error) error {
		if err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
		files = append(files, f)
		return nil
	}
	summary := struct {
		Command   string    `json:"command"`
		Scenarios []Summary `json:"scenarios"`
	}{Command: command, Scenarios: []Summary{}}
	for _, r := range rs {
		f := filepath.Join(dir, r.Scenario.Name+".json")
		if err := add(f, r.WriteJSON(f)); err != nil {
			return files, err
		}
		f = filepath.Join(dir, r.Scenario.Name+".png")
		if err := add(f, Plot(r, f)); err != nil {
			return files, err
		}
		summary.Scenarios = append(summary.Scenarios, Summarize(r))
	}
	b, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		return files, err
	}
	f := filepath.Join(dir, "summary.json")
	if err := add(f, os.WriteFile(f, append(b, '\n'), 0o644)); err != nil {
		return files, err
	}
	if len(rs) > 1 {
		f := filepath.Join(dir, "all.png")
		if err := add(f, PlotAll(rs, f)); err != nil {
			return files, err
		}
	}
	return files, nil
}
