// Package pq is a binary min-heap over a slice, generic in its item type.
// Unlike container/heap it does not box items in interfaces on every push,
// which matters on the hot paths that use it: Dijkstra in linkstate and the
// event queues of the simulator (sim) and the link emulator (lab).
package pq

// Heap is a min-heap ordered by less; the zero Heap is not usable, build
// one with New.
type Heap[T any] struct {
	items []T
	less  func(a, b T) bool
}

// New returns an empty heap ordered by less, with room for capacity items.
func New[T any](less func(a, b T) bool, capacity int) Heap[T] {
	return Heap[T]{items: make([]T, 0, capacity), less: less}
}

// Len is the number of items.
func (h *Heap[T]) Len() int { return len(h.items) }

// Peek returns the least item without removing it; the heap must not be
// empty.
func (h *Heap[T]) Peek() T { return h.items[0] }

// Push adds an item.
func (h *Heap[T]) Push(x T) {
	h.items = append(h.items, x)
	s := h.items
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// Pop removes and returns the least item; the heap must not be empty.
func (h *Heap[T]) Pop() T {
	s := h.items
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	var zero T
	s[last] = zero // release what the vacated slot referenced
	s = s[:last]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < len(s) && h.less(s[l], s[m]) {
			m = l
		}
		if r < len(s) && h.less(s[r], s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	h.items = s
	return top
}
