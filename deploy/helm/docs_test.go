package helm_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// undocumented lists the values under a mapping node that have no
// description. As with helm-docs, a description is a comment above the key
// starting "# --"; it covers the key's whole value (the defaults under
// resources or securityContext are examples, not values of their own).
// Other comments head sections, whose keys each need a description.
func undocumented(n *yaml.Node, path string) []string {
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := strings.TrimPrefix(path+"."+k.Value, ".")
		switch {
		case described(k.HeadComment):
		case v.Kind == yaml.MappingNode && len(v.Content) > 0:
			out = append(out, undocumented(v, p)...)
		default:
			out = append(out, fmt.Sprintf("%s (line %d)", p, k.Line))
		}
	}
	return out
}

func described(comment string) bool {
	for _, l := range strings.Split(comment, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			return true
		}
	}
	return false
}

// STYLE 8: the chart's values are commented where they are defined.
func TestValuesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc))
	require.Equal(t, yaml.DocumentNode, doc.Kind)
	root := doc.Content[0]
	require.Equal(t, yaml.MappingNode, root.Kind)
	assert.Empty(t, undocumented(root, ""), "values without a comment where they are defined")

	// The check itself: a bare value is reported.
	var bare yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("# -- a\na: 1\n# section\nb:\n  # -- c\n  c: {x: 1}\n  # note\n  d: 3\n"), &bare))
	assert.Equal(t, []string{"b.d (line 8)"}, undocumented(bare.Content[0], ""))
}

// yamlBlocks returns the ```yaml blocks of a Markdown file.
func yamlBlocks(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "unterminated yaml block in %s", path)
	return blocks
}

// docFile is the first line of a ```yaml block that is one file of several
// values files, `# file: NAME` or `# file: NAME (with A, B)`: NAME is
// installed after A and B (helm install -f A -f B -f NAME). A block without
// "with" is rendered only as part of those that name it.
var docFile = regexp.MustCompile(`^# file: (\S+)(?: \(with ([^)]*)\))?`)

// STYLE 8: every values scenario docs/kubernetes.md shows (each ```yaml
// block there is a values file, or one of several) renders, and decodes
// strictly. The walkthrough of a mesh across clusters renders as an install
// does, in a namespace holding the mesh's CA Secrets, and its files are
// those of testdata/sites, which TestSites checks in detail.
func TestDocsValuesRender(t *testing.T) {
	t.Parallel()
	blocks := yamlBlocks(t, filepath.Join("..", "..", "docs", "kubernetes.md"))
	require.NotEmpty(t, blocks)
	a := newAPIServer(t, newMeshCAs(t).secrets()...)
	dir := t.TempDir()
	files := map[string]bool{}     // blocks by file name, and whether a scenario is rendered with them
	fragments := map[string]bool{} // files rendered only with others
	type scenario struct {
		name, file string
		with       []string
	}
	var scenarios []scenario
	for i, b := range blocks {
		f := filepath.Join(dir, fmt.Sprintf("block-%d.yaml", i))
		name := fmt.Sprint(i)
		var with []string
		if m := docFile.FindStringSubmatch(b); m != nil {
			name = m[1]
			f = filepath.Join(dir, name)
			require.NotContains(t, files, name, "two blocks are %s", name)
			files[name] = false
			if want, err := os.ReadFile(filepath.Join("testdata", "sites", name)); err == nil {
				assert.Equal(t, string(want), b, "docs/kubernetes.md's %s is testdata/sites/%s", name, name)
			}
			if m[2] == "" {
				fragments[name] = true
				require.NoError(t, os.WriteFile(f, []byte(b), 0o600))
				continue
			}
			for _, w := range strings.Split(m[2], ",") {
				with = append(with, strings.TrimSpace(w))
			}
		}
		require.NoError(t, os.WriteFile(f, []byte(b), 0o600))
		scenarios = append(scenarios, scenario{name, f, with})
	}
	for _, sc := range scenarios {
		var args []string
		for _, w := range sc.with {
			_, ok := files[w]
			require.True(t, ok, "%s is rendered with %s, which no block of the docs is", sc.name, w)
			files[w] = true
			args = append(args, "-f", filepath.Join(dir, w))
		}
		args = append(args, "-f", sc.file, "--api-versions", monitoringAPI, "--api-versions", certManagerAPI)
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			m := a.render(t, args...)
			m.statefulSet(t)
			m.mesh(t)
		})
	}
	for name := range fragments {
		assert.True(t, files[name], "%s is shown but no scenario is rendered with it", name)
	}
}
