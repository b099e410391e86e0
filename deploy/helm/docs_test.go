package helm_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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

// STYLE 8: every values scenario docs/kubernetes.md shows (each ```yaml
// block there is a values file) renders, and decodes strictly.
func TestDocsValuesRender(t *testing.T) {
	t.Parallel()
	blocks := yamlBlocks(t, filepath.Join("..", "..", "docs", "kubernetes.md"))
	require.NotEmpty(t, blocks)
	for i, b := range blocks {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			f := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(f, []byte(b), 0o600))
			m := render(t, "-f", f, "--api-versions", monitoringAPI)
			m.statefulSet(t)
			m.mesh(t)
		})
	}
}
