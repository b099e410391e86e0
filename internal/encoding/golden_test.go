package encoding

import (
	"encoding/hex"
	"fmt"
	"math"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Golden vectors of the hash layout of doc.go. They are exchanged between
// brokers: do not change. A broker that computes other positions for a
// category silently loses every message for the subscribers of a broker
// that computes these; if the layout must change, it needs a new wire
// version, not new vectors.
var goldenPositions = []struct {
	p         Params
	category  string
	positions []int
}{
	{Params{M: 192, K: 7}, "∃$stock", []int{3, 51, 26, 11, 111, 172, 71}},
	{Params{M: 192, K: 7}, "$stock=XYZ", []int{110, 20, 100, 105, 84, 60, 31}},
	{Params{M: 192, K: 7}, "∃#price", []int{13, 127, 15, 15, 176, 124, 187}},
	{Params{M: 192, K: 7}, "#price=50", []int{63, 166, 96, 51, 54, 36, 68}},
	{Params{M: 192, K: 7}, "?b=true", []int{62, 125, 187, 90, 5, 88, 33}},
	{Params{M: 192, K: 7}, `$a\=b=c`, []int{28, 84, 13, 120, 127, 189, 44}},
	{Params{M: 256, K: 8}, "∃$stock", []int{4, 69, 35, 14, 148, 229, 95, 88}},
	{Params{M: 256, K: 8}, "$stock=XYZ", []int{147, 26, 134, 141, 112, 80, 42, 28}},
	{Params{M: 256, K: 8}, "∃#price", []int{18, 170, 20, 20, 235, 165, 249, 29}},
	{Params{M: 256, K: 8}, "#price=50", []int{84, 222, 129, 68, 72, 48, 90, 61}},
	{Params{M: 256, K: 8}, "?b=true", []int{83, 167, 250, 120, 7, 117, 44, 7}},
	{Params{M: 256, K: 8}, `$a\=b=c`, []int{37, 113, 18, 160, 169, 252, 59, 108}},
	{Params{M: 512, K: 4}, "∃$stock", []int{9, 138, 71, 29}},
	{Params{M: 512, K: 4}, "$stock=XYZ", []int{294, 53, 268, 282}},
	{Params{M: 512, K: 4}, "∃#price", []int{36, 340, 40, 41}},
	{Params{M: 512, K: 4}, "#price=50", []int{168, 444, 258, 136}},
	{Params{M: 512, K: 4}, "?b=true", []int{167, 334, 501, 241}},
	{Params{M: 512, K: 4}, `$a\=b=c`, []int{74, 226, 36, 320}},
	{Params{M: 512, K: 6}, "∃$stock", []int{9, 138, 71, 29, 297, 459}},
	{Params{M: 512, K: 6}, "$stock=XYZ", []int{294, 53, 268, 282, 224, 161}},
	{Params{M: 512, K: 6}, "∃#price", []int{36, 340, 40, 41, 470, 330}},
	{Params{M: 512, K: 6}, "#price=50", []int{168, 444, 258, 136, 145, 96}},
	{Params{M: 512, K: 6}, "?b=true", []int{167, 334, 501, 241, 14, 235}},
	{Params{M: 512, K: 6}, `$a\=b=c`, []int{74, 226, 36, 320, 338, 505}},
}

// Wire forms (hex of AppendBinary) of the message and filter of Carzaniga09
// §3's example. Exchanged between brokers: do not change.
var goldenBlooms = []struct {
	p               Params
	message, filter string
}{
	{Params{M: 192, K: 7},
		"08aa90c4100248d09000100b11c208900020002440500108",
		"00a010800000001000001000104200900000000000000108"},
	{Params{M: 256, K: 8},
		"10501cb408058120300115850000a10242201804200400200040064020090002",
		"0000143400040000000001000000010040200800200400000000000000080002"},
	{Params{M: 512, K: 4},
		"00020020100320008000020000400000000500002001000000000000008800000410000440000000000010000000000400000010000000100000020000000000",
		"00000000100320000000000000000000000000000000000000000000000000000010000440000000000010000000000000000000000000000000000000000000"},
	{Params{M: 512, K: 6},
		"00020020100320008000020001400000000502002201000000000000018808000410000440021000000410000000000400000010080000100008420000000800",
		"00000000100320000000000000000000000000000200000000000000010000000010000440000000000410000000000000000000000000000000400000000000"},
}

// Golden vectors of cat-v2 (doc.go, "Fine categories"): existence and
// equality categories hash into the first quarter exactly as cat-v1 at
// M/4, fine categories into the rest. Exchanged between brokers: do not
// change.
var goldenPositionsV2 = []struct {
	p         Params
	category  string
	positions []int
}{
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "∃$stock", []int{1, 17, 8}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "rprice=14/3190", []int{166, 191, 210}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "rprice=1/1", []int{196, 107, 83}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "pstock=X", []int{131, 141, 125}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "sstock=Z", []int{241, 135, 239}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "ustock=Y", []int{138, 79, 243}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "bstock=XY", []int{97, 163, 122}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, "lstock=", []int{217, 95, 81}},
	{Params{Scheme: SchemeCatV2, M: 256, K: 3}, `ba\=b=cd`, []int{122, 76, 205}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "∃$stock", []int{9, 138, 71, 29, 297, 459}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "rprice=14/3190", []int{1330, 1530, 1687, 1453, 1683, 769}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "rprice=1/1", []int{1571, 858, 666, 801, 547, 1804}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "pstock=X", []int{1049, 1133, 1002, 865, 579, 1242}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "sstock=Z", []int{1929, 1082, 1912, 1668, 1209, 899}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "ustock=Y", []int{1105, 636, 1948, 1836, 888, 981}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "bstock=XY", []int{781, 1306, 978, 1883, 849, 1276}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, "lstock=", []int{1739, 761, 651, 1124, 1354, 621}},
	{Params{Scheme: SchemeCatV2, M: 2048, K: 6}, `ba\=b=cd`, []int{978, 612, 1641, 1454, 828, 1157}},
}

// The paper example of Carzaniga09 §3 under cat-v2, in the position-list
// wire form of advertisements (hex of AppendFilters): the message's Bloom
// (which never travels, but pins every category of it) and the filter's.
var goldenBloomsV2 = []struct {
	p               Params
	message, filter string
}{
	{Params{Scheme: SchemeCatV2, M: 256, K: 3},
		"650102000001010203020007020002050c02070202020001000200000000040200010103000001010000010400000102020100000202020104000301000102010101030100030200030400010000020102020200030402000106000100000000000103010002",
		"090400001a02056e1345"},
	{DefaultParams(),
		"e40109130603000b11090e0d1901060f0302370a03030e090d0b020a1509252106180e05041c1804110003030c09031205050307080010030001050a000506091c00110302071011010015030507060804010605050300010204041500100403090e02060b010004140d050708030b03120a10020a011500030a0b01020412030901010400000200010807120a0b07010601070c0206021100041c1607041209030f1407000c0702010503030606020008050c04000002021100070100030706071200040313080904110602070a0f040b1007070100030d08000c030b0302200d0105160101",
		"122403000b6b3e2b0d0b23098101b601be041e810100aa04"},
}

func TestGoldenPositions(t *testing.T) {
	for _, g := range goldenPositions {
		assert.Equal(t, g.positions, g.p.Positions(g.category, nil), "%q at M=%d K=%d", g.category, g.p.M, g.p.K)
	}
	for _, g := range goldenPositionsV2 {
		assert.Equal(t, g.positions, g.p.Positions(g.category, nil), "%q at %v", g.category, g.p)
	}
	// DefaultParams is part of the contract too: a broker built with other
	// defaults cannot join a mesh of these.
	assert.Equal(t, Params{M: 512, K: 6}, DefaultParamsV1())
	assert.Equal(t, Params{Scheme: SchemeCatV2, M: 2048, K: 6}, DefaultParams())
}

func TestGoldenBlooms(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{
		"stock": content.String("XYZ"), "price": content.Int(50), "quantity": content.Int(100),
	})
	f := content.MustParse(`stock = "XYZ" && price > 20`)[0]
	for _, g := range goldenBlooms {
		name := fmt.Sprintf("M=%d K=%d", g.p.M, g.p.K)
		assert.Equal(t, g.message, hex.EncodeToString(g.p.EncodeMessage(m).AppendBinary(nil, g.p)), name)
		assert.Equal(t, g.filter, hex.EncodeToString(encodeFilter(g.p, f).AppendBinary(nil, g.p)), name)
	}
}

func TestGoldenBloomsV2(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{
		"stock": content.String("XYZ"), "price": content.Int(50), "quantity": content.Int(100),
	})
	f := content.MustParse(`stock = "XYZ" && price > 20`)[0]
	assert.Equal(t, [][]string{{"$stock=XYZ", "∃#price", "rprice=2/3"}}, SchemeCatV2.FilterCategories(f))
	for _, g := range goldenBloomsV2 {
		assert.Equal(t, g.message, hex.EncodeToString(g.p.AppendFilters(nil, []Bloom{g.p.EncodeMessage(m)})), "%v", g.p)
		assert.Equal(t, g.filter, hex.EncodeToString(g.p.AppendFilters(nil, g.p.AppendFilter(nil, f))), "%v", g.p)
	}
}

// The first quarter of a cat-v2 Bloom is the cat-v1 Bloom at M/4 of the
// same existence and equality categories: one mesh-wide property that the
// design argues from (docs/design.md §2) and that makes the coarse part as
// selective as cat-v1 was.
func TestCoarsePartIsCatV1(t *testing.T) {
	g, err := workload.New(workload.Default())
	require.NoError(t, err)
	v2 := DefaultParams()
	v1 := DefaultParamsV1()
	for _, m := range g.Messages(200) {
		b1, b2 := v1.EncodeMessage(m), v2.EncodeMessage(m)
		var coarse Bloom
		for i := range v1.M {
			if b2.Has(i) {
				coarse.Set(i)
			}
		}
		require.Equal(t, b1, coarse, "%v", m)
		require.Greater(t, b2.PopCount(), b1.PopCount(), "fine categories go beyond")
	}
}

// The hash must behave like K independent uniform positions, or the
// false-positive study would not transfer to other workloads: the measured
// rate of a Bloom membership test is the textbook (1 - (1-1/M)^(K·n))^K
// within four binomial standard deviations. (Double hashing, h1 + i·h2,
// fails this at M=256, K=8 by about +50%.)
func TestMembershipFalsePositiveRateMatchesTheory(t *testing.T) {
	for _, p := range []Params{{M: 128, K: 4}, {M: 192, K: 7}, {M: 256, K: 8}, {M: 384, K: 5}, {M: 512, K: 4}, {M: 512, K: 8}} {
		const n, sets, probes = 20, 200, 1000
		hits, cat := 0, 0
		for range sets {
			var b Bloom
			for range n {
				b = b.Or(bloomOfCategories(p, []string{fmt.Sprintf("$member=%d", cat)}))
				cat++
			}
			for i := range probes {
				if bloomOfCategories(p, []string{fmt.Sprintf("#probe%d=%d", cat, i)}).SubsetOf(b) {
					hits++
				}
			}
		}
		rate := math.Pow(1-math.Pow(1-1/float64(p.M), float64(p.K*n)), float64(p.K))
		want := rate * sets * probes
		t.Logf("M=%d K=%d: %d hits, theory %.1f", p.M, p.K, hits, want)
		require.InDelta(t, want, float64(hits), 4*math.Sqrt(want), "M=%d K=%d", p.M, p.K)
	}
}
