package encoding

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bits-and-blooms/bitset"
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
				cats[b] = append(cats[b], SchemeCatV1.FilterCategories(f)[0])
			}
		}
	}
	for _, m := range mesh.messages {
		have := map[string]bool{}
		for _, c := range SchemeCatV1.Categories(m) {
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
	Scheme       string  `json:"scheme"`
	M            int     `json:"m"`
	K            int     `json:"k"`
	Filters      float64 `json:"filters"`      // Blooms per broker before reduction
	Distinct     float64 `json:"distinct"`     // after deduplication
	Advertised   float64 `json:"advertised"`   // after covering (Advertise)
	BytesBefore  float64 `json:"bytes_before"` // wire form of all Blooms (AppendFilters)
	BytesAfter   float64 `json:"bytes_after"`  // wire form of the advertisement
	ZeroCoverAll float64 `json:"zero_cover"`   // share of brokers whose advertisement is the zero Bloom
}

// TestAdvertisementStudy measures what deduplication and covering (docs/design.md
// §2) save, and the bytes of the advertisements in their wire form, on the
// paper workloads and the range-heavy one: 100 brokers of 10 clients × 20
// filters (Carzaniga09 §5.1.4). Run with -args -study.
func TestAdvertisementStudy(t *testing.T) {
	if !*study {
		t.Skip("run with -args -study")
	}
	const brokers, clients = 100, 10
	var rows []advRow
	for _, w := range studyWorkloads {
		mesh := newPaperMesh(t, w.cfg, brokers, clients, 0)
		for _, p := range append(benchParams[:2:2], DefaultParamsV1(), DefaultParams()) {
			row := advRow{Workload: w.name, Scheme: p.Scheme.String(), M: p.M, K: p.K}
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
				row.BytesBefore += float64(p.FiltersSize(filters))
				row.BytesAfter += float64(p.FiltersSize(adv))
				if len(adv) == 1 && adv[0].IsZero() {
					row.ZeroCoverAll++
				}
			}
			row.Filters /= brokers
			row.Distinct /= brokers
			row.Advertised /= brokers
			row.BytesBefore /= brokers
			row.BytesAfter /= brokers
			row.ZeroCoverAll /= brokers
			rows = append(rows, row)
		}
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%-8s %-7s %4s %3s %8s %8s %10s %8s %8s\n", "workload", "scheme", "M", "K", "filters", "distinct", "advertised", "bytes", "after")
	for _, r := range rows {
		fmt.Fprintf(&s, "%-8s %-7s %4d %3d %8.1f %8.1f %10.1f %8.0f %8.0f\n",
			r.Workload, r.Scheme, r.M, r.K, r.Filters, r.Distinct, r.Advertised, r.BytesBefore, r.BytesAfter)
	}
	t.Log("\n" + s.String())
	data, err := json.MarshalIndent(rows, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("..", "..", "docs", "results", "data", "advertisement.json")
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
}

// schemeRow is one (workload, brokers, params, layout) cell of the scheme
// study: old and new encodings side by side.
type schemeRow struct {
	Workload string `json:"workload"`
	Brokers  int    `json:"brokers"`
	Scheme   string `json:"scheme"`
	M        int    `json:"m"`
	K        int    `json:"k"`
	// Layout is "encoder" for the package's own Blooms, "uniform" for the
	// same categories hashed over all M bits instead of cat-v2's split
	// (computed here from the category strings, to argue the split).
	Layout   string `json:"layout"`
	Pairs    int    `json:"pairs"`
	Exact    int    `json:"exact"`
	Category int    `json:"category"`
	Selected int    `json:"selected"`
	// FloorFP is (Category-Exact)/Category, the broker-level rate with a
	// perfect hash; BrokerFP is (Selected-Exact)/Selected; PairFP is
	// (Selected-Exact)/Pairs, the chance that a broker gets a message
	// uselessly.
	FloorFP  float64 `json:"floor_fp"`
	BrokerFP float64 `json:"broker_fp"`
	PairFP   float64 `json:"pair_fp"`
	// Categories is the mean number of categories of a message; Blooms the
	// mean number of Blooms a broker's filters encode to (before Advertise).
	Categories float64 `json:"categories"`
	Blooms     float64 `json:"blooms"`
	// CoarseDensity and FineDensity are the mean shares of set bits in
	// the message Blooms' two parts (cat-v1: all of it is coarse).
	CoarseDensity float64 `json:"coarse_density"`
	FineDensity   float64 `json:"fine_density,omitempty"`
}

// studyWorkloads are the paper's presets, the range-heavy one, and
// "ranges-2": Ranges with two attributes per filter, conjunctions of
// ranges, the case cat-v2 encodes least well (docs/design.md §2).
var studyWorkloads = []struct {
	name string
	cfg  workload.Config
}{{"default", workload.Default()}, {"single", workload.SingleConstraint()}, {"ranges", workload.Ranges()}, {"ranges-2", rangesConjunctions()}}

func rangesConjunctions() workload.Config {
	c := workload.Ranges()
	c.MinConstraints, c.MaxConstraints = 2, 2
	return c
}

// TestSchemeStudy measures broker-level false positives of cat-v1 and
// cat-v2 on the paper's workloads and on the range-heavy one, at 8 and 100
// brokers of 10 clients × 20 filters, and sweeps cat-v2's M and K on
// single and ranges at 100 brokers. Run with -args -study; it writes
// docs/results/data/scheme-study.json. Every pair is also checked for eq.
// 1: exact ⊆ category ⊆ selected.
func TestSchemeStudy(t *testing.T) {
	if !*study {
		t.Skip("run with -args -study")
	}
	const clientsPerBroker, messages = 10, 2000
	var rows []schemeRow
	for _, w := range studyWorkloads {
		for _, brokers := range []int{8, 100} {
			mesh := newPaperMesh(t, w.cfg, brokers, clientsPerBroker, messages)
			params := []Params{DefaultParamsV1(), DefaultParams()}
			if brokers == 100 && (w.name == "single" || w.name == "ranges") {
				for _, m := range []int{1024, 1536, 2048} {
					for _, k := range []int{4, 6, 8} {
						if p := (Params{Scheme: SchemeCatV2, M: m, K: k}); p != DefaultParams() {
							params = append(params, p)
						}
					}
				}
			}
			floors := map[Scheme]schemeFloor{}
			for _, p := range params {
				fl, ok := floors[p.Scheme]
				if !ok {
					fl = studySchemeFloor(mesh, p.Scheme)
					floors[p.Scheme] = fl
				}
				layouts := []string{"encoder"}
				if p.Scheme == SchemeCatV2 && p.M == 2048 {
					layouts = append(layouts, "uniform")
				}
				for _, layout := range layouts {
					row := studySchemeCell(t, mesh, p, layout, fl)
					row.Workload, row.Brokers = w.name, brokers
					rows = append(rows, row)
				}
			}
		}
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%-8s %4s %-7s %5s %3s %-8s %8s %8s %8s %8s %7s %7s %7s %6s %7s %6s %6s\n",
		"workload", "brk", "scheme", "M", "K", "layout", "pairs", "exact", "category", "selected", "floorFP", "brokFP", "pairFP", "cats", "blooms", "dCoarse", "dFine")
	for _, r := range rows {
		fmt.Fprintf(&s, "%-8s %4d %-7s %5d %3d %-8s %8d %8d %8d %8d %6.2f%% %6.2f%% %6.2f%% %6.1f %7.1f %6.3f %6.3f\n",
			r.Workload, r.Brokers, r.Scheme, r.M, r.K, r.Layout, r.Pairs, r.Exact, r.Category, r.Selected,
			100*r.FloorFP, 100*r.BrokerFP, 100*r.PairFP, r.Categories, r.Blooms, r.CoarseDensity, r.FineDensity)
	}
	t.Log("\n" + s.String())
	data, err := json.MarshalIndent(rows, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("..", "..", "docs", "results", "data", "scheme-study.json")
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
}

// schemeFloor is the exact and the category-level match of every (message,
// broker) pair under one scheme, and each broker's category sets.
type schemeFloor struct {
	exact, category [][]bool
	sets            [][][]string // sets[b]: every category set of broker b
	categories      float64      // mean categories per message
}

func studySchemeFloor(mesh paperMesh, s Scheme) schemeFloor {
	var fl schemeFloor
	fl.sets = make([][][]string, len(mesh.brokers))
	for b, preds := range mesh.brokers {
		for _, p := range preds {
			for _, f := range p {
				fl.sets[b] = append(fl.sets[b], s.FilterCategories(f)...)
			}
		}
	}
	cats := 0
	for _, m := range mesh.messages {
		have := map[string]bool{}
		for _, c := range s.Categories(m) {
			have[c] = true
		}
		cats += len(have)
		ex := make([]bool, len(mesh.brokers))
		ca := make([]bool, len(mesh.brokers))
		for b := range mesh.brokers {
			ex[b] = mesh.exact(b, m)
		sets:
			for _, set := range fl.sets[b] {
				for _, c := range set {
					if !have[c] {
						continue sets
					}
				}
				ca[b] = true
				break
			}
		}
		fl.exact = append(fl.exact, ex)
		fl.category = append(fl.category, ca)
	}
	fl.categories = float64(cats) / float64(len(mesh.messages))
	return fl
}

// uniformBloom is β of categories with every category hashed over all of
// [0, M), as cat-v1 does, instead of cat-v2's split.
func uniformBloom(p Params, cats []string) Bloom {
	var b Bloom
	for _, c := range cats {
		h := hashCategory([]byte(c))
		for i := range p.K {
			b.Set(position(h, i, uint64(p.M)))
		}
	}
	return b
}

func studySchemeCell(t *testing.T, mesh paperMesh, p Params, layout string, fl schemeFloor) schemeRow {
	row := schemeRow{Scheme: p.Scheme.String(), M: p.M, K: p.K, Layout: layout, Categories: fl.categories}
	tab := NewTable(p)
	nBlooms := 0
	for b := range mesh.brokers {
		var filters []Bloom
		if layout == "uniform" {
			for _, set := range fl.sets[b] {
				filters = append(filters, uniformBloom(p, set))
			}
		} else {
			filters = mesh.filters(p, b)
		}
		nBlooms += len(filters)
		tab.Set(uint32(b), filters)
	}
	row.Blooms = float64(nBlooms) / float64(len(mesh.brokers))
	snap := tab.Snapshot()
	coarse := p.coarseBits()
	var coarseBits, fineBits int
	dst := bitset.New(uint(len(mesh.brokers)))
	for i, m := range mesh.messages {
		var bm Bloom
		if layout == "uniform" {
			bm = uniformBloom(p, p.Scheme.Categories(m))
		} else {
			bm = p.EncodeMessage(m)
		}
		for _, pos := range bm.AppendPositions(nil) {
			if pos < coarse {
				coarseBits++
			} else {
				fineBits++
			}
		}
		dst.ClearAll()
		snap.Match(bm, dst)
		for b := range mesh.brokers {
			selected := dst.Test(uint(b))
			// Carzaniga09 §3, eq. 1: the encodings are necessary conditions.
			require.False(t, fl.exact[i][b] && !fl.category[i][b], "categorization lost an exact match")
			require.False(t, fl.category[i][b] && !selected, "Bloom lost a category match")
			row.Pairs++
			if fl.exact[i][b] {
				row.Exact++
			}
			if fl.category[i][b] {
				row.Category++
			}
			if selected {
				row.Selected++
			}
		}
	}
	if row.Category > 0 {
		row.FloorFP = float64(row.Category-row.Exact) / float64(row.Category)
	}
	if row.Selected > 0 {
		row.BrokerFP = float64(row.Selected-row.Exact) / float64(row.Selected)
	}
	row.PairFP = float64(row.Selected-row.Exact) / float64(row.Pairs)
	n := float64(len(mesh.messages))
	row.CoarseDensity = float64(coarseBits) / n / float64(coarse)
	if fine := p.M - coarse; fine > 0 {
		row.FineDensity = float64(fineBits) / n / float64(fine)
	}
	if layout == "uniform" {
		row.CoarseDensity = float64(coarseBits+fineBits) / n / float64(p.M)
		row.FineDensity = 0
	}
	return row
}
