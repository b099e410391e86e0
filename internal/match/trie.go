package match

import "slices"

// byteTrie maps the operands of prefix, suffix or contains constraints to
// their ids so that every operand that is a prefix of a string is found in
// one walk along the string, at a cost bounded by the longest operand and
// not by how many operands there are. Suffix tries hold their operands
// reversed and are walked from the end of the string.
type byteTrie struct {
	nodes []trieNode // nodes[0] is the root, whose key is ""
	root  [256]int32 // the root's children by byte, 0 when absent: the root has many, other nodes few
	keys  int        // operands present
	free  []int32
	path  []int32 // scratch for remove
}

type trieNode struct {
	c     int32      // the constraint whose operand ends here, or none
	edges []trieEdge // children below the root, unordered
}

type trieEdge struct {
	label byte
	kid   int32
}

func newTrie() *byteTrie { return &byteTrie{nodes: []trieNode{{c: none}}} }

// keyByte returns byte i of key, counted from the end if rev.
func keyByte(key string, i int, rev bool) byte {
	if rev {
		return key[len(key)-1-i]
	}
	return key[i]
}

// child returns the child of node n along byte b, or 0.
func (t *byteTrie) child(n int32, b byte) int32 {
	if n == 0 {
		return t.root[b]
	}
	// Below the root a node has a handful of children: a plain loop will do.
	for _, e := range t.nodes[n].edges {
		if e.label == b {
			return e.kid
		}
	}
	return 0
}

// insert adds key, which must be absent, for constraint c.
func (t *byteTrie) insert(key string, rev bool, c int32) {
	t.keys++
	n := int32(0)
	for i := range len(key) {
		b := keyByte(key, i, rev)
		next := t.child(n, b)
		if next == 0 {
			next = t.newNode()
			if n == 0 {
				t.root[b] = next
			} else {
				t.nodes[n].edges = append(t.nodes[n].edges, trieEdge{b, next})
			}
		}
		n = next
	}
	t.nodes[n].c = c
}

func (t *byteTrie) newNode() int32 {
	if k := len(t.free); k > 0 {
		n := t.free[k-1]
		t.free = t.free[:k-1]
		t.nodes[n] = trieNode{c: none}
		return n
	}
	t.nodes = append(t.nodes, trieNode{c: none})
	return int32(len(t.nodes) - 1)
}

// remove drops key, which must be present, prunes the nodes that no
// longer lead to any operand, and reports whether the trie is now empty.
func (t *byteTrie) remove(key string, rev bool) (empty bool) {
	t.keys--
	t.path = append(t.path[:0], 0)
	n := int32(0)
	for i := range len(key) {
		n = t.child(n, keyByte(key, i, rev))
		t.path = append(t.path, n)
	}
	t.nodes[n].c = none
	for i := len(key); i > 0; i-- {
		n := t.path[i]
		if t.nodes[n].c != none || len(t.nodes[n].edges) > 0 {
			break
		}
		parent, b := t.path[i-1], keyByte(key, i-1, rev)
		if parent == 0 {
			t.root[b] = 0
		} else {
			p := &t.nodes[parent]
			j := slices.IndexFunc(p.edges, func(e trieEdge) bool { return e.label == b })
			last := len(p.edges) - 1
			p.edges[j] = p.edges[last]
			p.edges = p.edges[:last]
		}
		t.nodes[n] = trieNode{}
		t.free = append(t.free, n)
	}
	return t.keys == 0
}
