package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLedgerVerdicts(t *testing.T) {
	l := newLedger(2)
	l.add(0, 0, 0, []int32{1, 3})
	l.add(0, 1, 0, nil)
	l.add(1, 0, 0, []int32{0})
	tests := []struct {
		name string
		pub  uint32
		seq  uint64
		sub  int32
		want verdict
	}{
		{"first copy", 0, 0, 1, expected},
		{"second copy", 0, 0, 1, duplicate},
		{"third copy", 0, 0, 1, duplicate},
		{"other expected subscriber", 0, 0, 3, expected},
		{"not expected", 0, 0, 2, falsePositive},
		{"matched nobody", 0, 1, 0, falsePositive},
		{"other publisher", 1, 0, 0, expected},
		{"unknown sequence", 1, 1, 0, unknown},
		{"unknown publisher", 2, 0, 0, unknown},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, l.deliver(tt.pub, tt.seq, tt.sub), tt.name)
	}
	bySub, bySec := l.undelivered(4, 3)
	assert.Equal(t, []uint64{0, 0, 0, 0}, bySub)
	assert.Equal(t, []uint64{0, 0, 0}, bySec)

	assert.Empty(t, l.misses(10))

	l.add(1, 1, 2345*time.Millisecond, []int32{0, 2})
	bySub, bySec = l.undelivered(4, 3)
	assert.Equal(t, []uint64{1, 0, 1, 0}, bySub)
	assert.Equal(t, []uint64{0, 0, 2}, bySec, "counted in the second the message was sent")
	assert.Equal(t, []Miss{{Subscriber: 0, Publisher: 1, Seq: 1, SentS: 2.345}, {Subscriber: 2, Publisher: 1, Seq: 1, SentS: 2.345}}, l.misses(10),
		"each undelivered delivery, with when its message was sent")
	assert.Len(t, l.misses(1), 1, "at most the limit")
	assert.Panics(t, func() { l.add(1, 5, 0, nil) }, "sequence numbers must be dense")
}

func TestLedgerDuplicateCountSaturates(t *testing.T) {
	l := newLedger(1)
	l.add(0, 0, 0, []int32{0})
	require.Equal(t, expected, l.deliver(0, 0, 0))
	for range 1000 {
		require.Equal(t, duplicate, l.deliver(0, 0, 0))
	}
}

func BenchmarkLedgerDeliver(b *testing.B) {
	l := newLedger(1)
	for seq := range uint64(1 << 16) {
		l.add(0, seq, 0, []int32{1, 5, 9, 40})
	}
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		l.deliver(0, i%(1<<16), 5)
		i++
	}
}
