package encoding

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/require"
)

var study = flag.Bool("study", false, "run the false-positive study and write docs/results/data/fp-study.json")

// fpRow is one (workload, brokers, M, K) cell of the study.
type fpRow struct {
	Workload string `json:"workload"`
	Brokers  int    `json:"brokers"`
	M        int    `json:"m"`
	K        int    `json:"k"`
	// Pairs is messages × brokers; Exact, Category and Selected count the
	// pairs where some filter of the broker matches exactly, matches on
	// category sets (no hashing: the floor of Carzaniga09 §3's coarse
	// categorization) and matches on Blooms. Exact ⊆ Category ⊆ Selected.
	Pairs    int `json:"pairs"`
	Exact    int `json:"exact"`
	Category int `json:"category"`
	Selected int `json:"selected"`
	// BrokerFP is (Selected-Exact)/Selected: the share of the brokers a
	// message is sent to that deliver it to nobody. BloomFP is the part of
	// it the Bloom filters add over the categorization,
	// (Selected-Category)/Selected. PairFP is (Selected-Exact)/Pairs, the
	// chance that a given broker receives a given message uselessly.
	//
	// NegFP is the Bloom filter's own false-positive rate at broker level:
	// the share of the pairs without a category match that are selected,
	// (Selected-Category)/(Pairs-Category).
	BrokerFP float64 `json:"broker_fp"`
	BloomFP  float64 `json:"bloom_fp"`
	PairFP   float64 `json:"pair_fp"`
	NegFP    float64 `json:"neg_fp"`
	// MessageDensity is the mean share of a message Bloom's M bits that are
	// set; it is what the index prunes with.
	MessageDensity float64 `json:"message_density"`
}

// TestFalsePositiveStudy measures the false-positive rate of the encoding on
// the workload of Carzaniga09 §5.1.4 (Carzaniga09 §3: the encoding is only a
// necessary condition). Run with -args -study; it also checks, over every
// pair, that Exact ⊆ Category ⊆ Selected (no false negatives, eq. 1).
func TestFalsePositiveStudy(t *testing.T) {
	if !*study {
		t.Skip("run with -args -study")
	}
	const clientsPerBroker, messages = 10, 2000
	var rows []fpRow
	for _, w := range []struct {
		name string
		cfg  workload.Config
	}{{"default", workload.Default()}, {"single", workload.SingleConstraint()}} {
		for _, brokers := range []int{8, 100} {
			mesh := newPaperMesh(t, w.cfg, brokers, clientsPerBroker, messages)
			exact, category := studyFloor(mesh)
			for _, m := range []int{128, 192, 256, 384, 512} {
				for k := 2; k <= 14; k++ {
					row := studyCell(t, mesh, Params{M: m, K: k}, exact, category)
					row.Workload, row.Brokers = w.name, brokers
					rows = append(rows, row)
				}
			}
		}
	}
	printStudy(t, rows)
	data, err := json.MarshalIndent(rows, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("..", "..", "docs", "results", "data", "fp-study.json")
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
}

// studyFloor computes, per (message, broker), the exact match and the match
// on category sets.
func studyFloor(mesh paperMesh) (exact, category [][]bool) {
	cats := make([][][]string, len(mesh.brokers))
	for b, preds := range mesh.brokers {
		for _, p := range preds {
			for _, f := range p {
				cats[b] = append(cats[b], FilterCategories(f))
			}
		}
	}
	for _, m := range mesh.messages {
		have := map[string]bool{}
		for _, c := range Categories(m) {
			have[c] = true
		}
		ex := make([]bool, len(mesh.brokers))
		ca := make([]bool, len(mesh.brokers))
		for b := range mesh.brokers {
			ex[b] = mesh.exact(b, m)
		filters:
			for _, fc := range cats[b] {
				for _, c := range fc {
					if !have[c] {
						continue filters
					}
				}
				ca[b] = true
				break
			}
		}
		exact = append(exact, ex)
		category = append(category, ca)
	}
	return exact, category
}

func studyCell(t *testing.T, mesh paperMesh, p Params, exact, category [][]bool) fpRow {
	filters := make([][]Bloom, len(mesh.brokers))
	for b := range mesh.brokers {
		filters[b] = mesh.filters(p, b)
	}
	row := fpRow{M: p.M, K: p.K}
	bits := 0
	for i, m := range mesh.messages {
		bm := p.EncodeMessage(m)
		bits += bm.PopCount()
		for b := range mesh.brokers {
			selected := false
			for _, f := range filters[b] {
				if f.SubsetOf(bm) {
					selected = true
					break
				}
			}
			// Carzaniga09 §3, eq. 1: the encodings are necessary conditions.
			require.False(t, exact[i][b] && !category[i][b], "categorization lost an exact match")
			require.False(t, category[i][b] && !selected, "Bloom lost a category match")
			row.Pairs++
			if exact[i][b] {
				row.Exact++
			}
			if category[i][b] {
				row.Category++
			}
			if selected {
				row.Selected++
			}
		}
	}
	if row.Selected > 0 {
		row.BrokerFP = float64(row.Selected-row.Exact) / float64(row.Selected)
		row.BloomFP = float64(row.Selected-row.Category) / float64(row.Selected)
	}
	row.PairFP = float64(row.Selected-row.Exact) / float64(row.Pairs)
	if row.Pairs > row.Category {
		row.NegFP = float64(row.Selected-row.Category) / float64(row.Pairs-row.Category)
	}
	row.MessageDensity = float64(bits) / float64(len(mesh.messages)*p.M)
	return row
}

func printStudy(t *testing.T, rows []fpRow) {
	var s strings.Builder
	fmt.Fprintf(&s, "%-8s %4s %4s %3s %9s %9s %9s %8s %8s %8s %8s %7s\n",
		"workload", "brk", "M", "K", "exact", "category", "selected", "brokerFP", "bloomFP", "pairFP", "negFP", "density")
	for _, r := range rows {
		fmt.Fprintf(&s, "%-8s %4d %4d %3d %9d %9d %9d %8.4f %8.4f %8.4f %8.4f %7.3f\n",
			r.Workload, r.Brokers, r.M, r.K, r.Exact, r.Category, r.Selected,
			r.BrokerFP, r.BloomFP, r.PairFP, r.NegFP, r.MessageDensity)
	}
	t.Log("\n" + s.String())
}

// advRow is the advertisement size of one broker, averaged over brokers.
type advRow struct {
	Workload     string  `json:"workload"`
	M            int     `json:"m"`
	K            int     `json:"k"`
	Filters      float64 `json:"filters"`      // Blooms per broker before reduction
	Distinct     float64 `json:"distinct"`     // after deduplication
	Advertised   float64 `json:"advertised"`   // after covering (Advertise)
	BytesBefore  float64 `json:"bytes_before"` // Filters × M/8
	BytesAfter   float64 `json:"bytes_after"`  // Advertised × M/8
	ZeroCoverAll float64 `json:"zero_cover"`   // share of brokers whose advertisement is the zero Bloom
}

// TestAdvertisementStudy measures what deduplication and covering (docs/design.md
// §2) save on the paper workload: 100 brokers of 10 clients × 20 filters
// (Carzaniga09 §5.1.4). Run with -args -study.
func TestAdvertisementStudy(t *testing.T) {
	if !*study {
		t.Skip("run with -args -study")
	}
	const brokers, clients = 100, 10
	var rows []advRow
	for _, w := range benchWorkloads {
		mesh := newPaperMesh(t, w.cfg, brokers, clients, 0)
		for _, p := range benchParams {
			row := advRow{Workload: w.name, M: p.M, K: p.K}
			for b := range brokers {
				filters := mesh.filters(p, b)
				distinct := map[Bloom]bool{}
				for _, f := range filters {
					distinct[f] = true
				}
				adv := Advertise(filters)
				row.Filters += float64(len(filters))
				row.Distinct += float64(len(distinct))
				row.Advertised += float64(len(adv))
				if len(adv) == 1 && adv[0].IsZero() {
					row.ZeroCoverAll++
				}
			}
			row.Filters /= brokers
			row.Distinct /= brokers
			row.Advertised /= brokers
			row.ZeroCoverAll /= brokers
			row.BytesBefore = row.Filters * float64(p.Bytes())
			row.BytesAfter = row.Advertised * float64(p.Bytes())
			rows = append(rows, row)
		}
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%-8s %4s %3s %8s %8s %10s %8s %8s\n", "workload", "M", "K", "filters", "distinct", "advertised", "bytes", "after")
	for _, r := range rows {
		fmt.Fprintf(&s, "%-8s %4d %3d %8.1f %8.1f %10.1f %8.0f %8.0f\n",
			r.Workload, r.M, r.K, r.Filters, r.Distinct, r.Advertised, r.BytesBefore, r.BytesAfter)
	}
	t.Log("\n" + s.String())
	data, err := json.MarshalIndent(rows, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("..", "..", "docs", "results", "data", "advertisement.json")
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
}
