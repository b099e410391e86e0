package dashboards_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

const (
	dashboardDir = "../../deploy/helm/drip/dashboards"
	metricsDoc   = "../../docs/metrics.md"
)

// dashboard is the part of Grafana's dashboard JSON model the checks read.
type dashboard struct {
	file          string
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	SchemaVersion int      `json:"schemaVersion"`
	Editable      bool     `json:"editable"`
	Tags          []string `json:"tags"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Datasource *dsRef          `json:"datasource"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": string} since Grafana 10
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	Current    struct {
		Value any `json:"value"`
	} `json:"current"`
}

func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

type panel struct {
	ID         int      `json:"id"`
	Type       string   `json:"type"`
	Title      string   `json:"title"`
	Datasource *dsRef   `json:"datasource"`
	GridPos    gridPos  `json:"gridPos"`
	Targets    []target `json:"targets"`
	Panels     []panel  `json:"panels"` // of a collapsed row
}

type gridPos struct{ H, W, X, Y int }

type target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Datasource   *dsRef `json:"datasource"`
}

func decodeDashboard(file string, data []byte) (dashboard, error) {
	if !json.Valid(data) {
		return dashboard{}, fmt.Errorf("%s is not valid JSON", file)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return dashboard{}, fmt.Errorf("%s does not follow Grafana's dashboard model: %w", file, err)
	}
	d.file = file
	return d, nil
}

// loadDashboards reads every dashboard the chart ships.
func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no dashboards in %s", dashboardDir)
	var ds []dashboard
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		d, err := decodeDashboard(filepath.Base(f), data)
		require.NoError(t, err)
		ds = append(ds, d)
	}
	return ds
}

// metricDoc is one row of docs/metrics.md: the type and the labels a
// series of the metric can carry once scraped.
type metricDoc struct {
	typ    string
	labels map[string]bool
}

type contract map[string]metricDoc

// A table row such as "| `drip_link_dropped_bundles_total{reason}` | counter | ... |".
var contractRow = regexp.MustCompile("^\\|\\s*`(drip_[a-z0-9_]+)(?:\\{([a-z_,]+)\\})?`\\s*\\|\\s*([a-z]+)\\s*\\|")

// parseContract reads the metric tables of docs/metrics.md. Metrics under
// "## Per link" carry the peer label, which their rows leave implicit;
// every scraped series carries job and instance.
func parseContract(md string) (contract, error) {
	c := contract{}
	perLink := false
	for n, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "## ") {
			perLink = strings.HasPrefix(line, "## Per link")
		}
		m := contractRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, labels, typ := m[1], m[2], m[3]
		if _, dup := c[name]; dup {
			return nil, fmt.Errorf("metrics.md line %d: %s documented twice", n+1, name)
		}
		switch typ {
		case "counter", "gauge", "histogram":
		default:
			return nil, fmt.Errorf("metrics.md line %d: %s has unknown type %q", n+1, name, typ)
		}
		doc := metricDoc{typ: typ, labels: map[string]bool{"job": true, "instance": true}}
		if labels != "" {
			for _, l := range strings.Split(labels, ",") {
				doc.labels[l] = true
			}
		}
		if perLink {
			doc.labels["peer"] = true
		}
		c[name] = doc
	}
	if len(c) == 0 {
		return nil, errors.New("metrics.md documents no drip_ metric in its tables")
	}
	return c, nil
}

func loadContract(t *testing.T) contract {
	t.Helper()
	md, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	c, err := parseContract(string(md))
	require.NoError(t, err)
	return c
}

// lookup resolves a series name to its documented metric: a histogram is
// exposed as name_bucket (with le), name_sum and name_count.
func (c contract) lookup(series string) (base string, doc metricDoc, ok bool) {
	if doc, ok := c[series]; ok && doc.typ != "histogram" {
		return series, doc, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base := strings.TrimSuffix(series, suffix)
		doc, ok := c[base]
		if base == series || !ok || doc.typ != "histogram" {
			continue
		}
		if suffix == "_bucket" {
			labels := map[string]bool{"le": true}
			for l := range doc.labels {
				labels[l] = true
			}
			doc.labels = labels
		}
		return base, doc, true
	}
	return "", metricDoc{}, false
}

// Grafana's variable syntaxes: $name, ${name}, ${name:format}, [[name]].
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]`)

// groupRef is a regular expression's group, as label_replace's replacement
// refers to it.
var groupRef = regexp.MustCompile(`^[0-9]+$`)

// expand substitutes Grafana variables as Grafana would before sending a
// query, and names every variable it has no value for.
func expand(text string, values map[string]string) (string, error) {
	var undefined []string
	out := variableRef.ReplaceAllStringFunc(text, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3] // exactly one is set
		if groupRef.MatchString(name) {
			// label_replace's $1: no dashboard variable has such a name,
			// and Grafana leaves a reference to none as it is.
			return ref
		}
		v, ok := values[name]
		if !ok {
			undefined = append(undefined, "$"+name)
			return ref
		}
		return v
	})
	if undefined != nil {
		return "", fmt.Errorf("undefined variable %s", strings.Join(undefined, ", "))
	}
	return out, nil
}

// values are the variable values for evaluation: Grafana's interval
// variables as one minute, query variables as "All" (".*", their allValue),
// custom ones as their current value. Data source variables get none:
// an expression has no business naming one. With markers, query variables
// expand to "<name>" instead, so that a label matcher using the variable
// can be recognised after parsing.
func (d dashboard) values(markers bool) map[string]string {
	v := map[string]string{"__rate_interval": "1m", "__interval": "1m", "__range": "1m"}
	for _, x := range d.Templating.List {
		switch x.Type {
		case "query":
			v[x.Name] = ".*"
			if markers {
				v[x.Name] = "<" + x.Name + ">"
			}
		case "custom", "constant", "textbox":
			v[x.Name] = fmt.Sprint(x.Current.Value)
		}
	}
	return v
}

func (d dashboard) variable(name string) (variable, bool) {
	for _, v := range d.Templating.List {
		if v.Name == name {
			return v, true
		}
	}
	return variable{}, false
}

// query is one PromQL text of a dashboard: a panel target's expression,
// or the series selector of a label_values variable.
type query struct {
	where  string
	expr   string
	legend string
	panel  bool
	label  string // of label_values
}

var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*(\w+)\s*\)\s*$`)

func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// queries lists the dashboard's PromQL; a query variable that is not
// label_values(selector, label) is a problem.
func (d dashboard) queries() ([]query, []string) {
	var qs []query
	var problems []string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.queryText())
		if m == nil {
			problems = append(problems, fmt.Sprintf("variable %q: query %q is not label_values(selector, label)", v.Name, v.queryText()))
			continue
		}
		qs = append(qs, query{where: fmt.Sprintf("variable %q", v.Name), expr: m[1], label: m[2]})
	}
	for _, p := range flatten(d.Panels) {
		for _, t := range p.Targets {
			qs = append(qs, query{where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), expr: t.Expr, legend: t.LegendFormat, panel: true})
		}
	}
	return qs, problems
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

func legendLabels(legend string) []string {
	var out []string
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		out = append(out, m[1])
	}
	return out
}

var promql = parser.NewParser(parser.Options{})

// lint returns every problem of the dashboards, each naming its file and
// place; none means they may ship.
func lint(ds []dashboard, c contract) []string {
	var problems []string
	uids := map[string]string{}
	for _, d := range ds {
		if other, dup := uids[d.UID]; dup && d.UID != "" {
			problems = append(problems, fmt.Sprintf("%s: uid %q is also the uid of %s", d.file, d.UID, other))
		}
		uids[d.UID] = d.file
		for _, p := range lintDashboard(d, c) {
			problems = append(problems, d.file+": "+p)
		}
	}
	return problems
}

func lintDashboard(d dashboard, c contract) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if d.UID == "" {
		add("no uid: Grafana would assign a random one and links to the dashboard would break")
	}
	if d.Title == "" {
		add("no title")
	}
	// Data source references as objects and the $__rate_interval of
	// current Grafana need schema 36 (Grafana 9) or later.
	if d.SchemaVersion < 36 {
		add("schemaVersion %d, want 36 or later", d.SchemaVersion)
	}
	if !d.Editable {
		add("not editable")
	}
	if !slices.Contains(d.Tags, "drip") {
		add("tags %v lack \"drip\" (the dashboards' links find each other by it)", d.Tags)
	}

	names := map[string]bool{}
	var dsVar string
	for _, v := range d.Templating.List {
		if names[v.Name] {
			add("variable %q defined twice", v.Name)
		}
		names[v.Name] = true
		if v.Type == "datasource" && v.queryText() == "prometheus" {
			dsVar = v.Name
		}
	}
	if dsVar == "" {
		add("no data source variable of type prometheus")
	}
	want := dsRef{Type: "prometheus", UID: "${" + dsVar + "}"}
	for _, v := range d.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || *v.Datasource != want) {
			add("variable %q: data source %+v, want %+v", v.Name, v.Datasource, want)
		}
	}

	ids := map[int]string{}
	for _, p := range flatten(d.Panels) {
		if other, dup := ids[p.ID]; dup {
			add("panel %q has id %d, like panel %q", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		if p.Title == "" {
			add("panel %d has no title", p.ID)
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			add("panel %q: gridPos %+v is outside the 24-column grid", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || *p.Datasource != want {
			add("panel %q: data source %+v, want %+v", p.Title, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			add("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			if refs[t.RefID] {
				add("panel %q: refId %q used twice", p.Title, t.RefID)
			}
			refs[t.RefID] = true
			if t.Datasource == nil || *t.Datasource != want {
				add("panel %q target %s: data source %+v, want %+v", p.Title, t.RefID, t.Datasource, want)
			}
		}
	}
	top := d.Panels
	for i := range top {
		for j := i + 1; j < len(top); j++ {
			if overlap(top[i].GridPos, top[j].GridPos) {
				add("panels %q and %q overlap", top[i].Title, top[j].Title)
			}
		}
	}

	qs, qproblems := d.queries()
	problems = append(problems, qproblems...)
	for _, q := range qs {
		problems = append(problems, lintQuery(d, c, q)...)
	}
	return problems
}

func overlap(a, b gridPos) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// lintQuery checks one PromQL text against the parser and the contract.
func lintQuery(d dashboard, c contract, q query) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, q.where+": "+fmt.Sprintf(format, args...))
	}
	text, err := expand(q.expr, d.values(false))
	if err != nil {
		add("%v in %q", err, q.expr)
		return problems
	}
	expr, err := promql.ParseExpr(text)
	if err != nil {
		add("does not parse: %v\n\t%s", err, text)
		return problems
	}
	if _, ok := expr.(*parser.VectorSelector); !ok && !q.panel {
		add("label_values needs a series selector, got %q", text)
	}

	known := map[string]bool{} // labels a series of the expression can carry
	var grouping []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if !strings.HasPrefix(n.Name, "drip_") {
				add("reads %q, which is not a drip metric (dashboards read only docs/metrics.md)", n.String())
				return nil
			}
			_, doc, ok := c.lookup(n.Name)
			if !ok {
				add("reads %s, which docs/metrics.md does not document", n.Name)
				return nil
			}
			for l := range doc.labels {
				known[l] = true
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !doc.labels[m.Name] {
					add("filters %s on label %q, which docs/metrics.md does not give it", n.Name, m.Name)
				}
			}
		case *parser.Call:
			// label_replace(v, "dst", ...) gives v's series the label dst.
			if n.Func.Name == "label_replace" && len(n.Args) > 1 {
				if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
					known[dst.Val] = true
				}
			}
		case *parser.AggregateExpr:
			grouping = append(grouping, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				grouping = append(grouping, n.VectorMatching.MatchingLabels...)
				grouping = append(grouping, n.VectorMatching.Include...)
			}
		}
		return nil
	})
	for _, l := range grouping {
		if !known[l] {
			add("groups or matches by %q, which no metric of the expression has", l)
		}
	}
	for _, l := range legendLabels(q.legend) {
		if !known[l] {
			add("legend uses {{%s}}, which no metric of the expression has", l)
		}
	}
	if q.panel {
		problems = append(problems, lintFilters(d, c, q)...)
	}
	return problems
}

// lintFilters checks that every selector of a panel query honours the
// dashboard's instance and peer variables, so that the panels show what
// the variables select. drip_build_info is exempt: it only labels series
// with the broker's name through a join on instance.
func lintFilters(d dashboard, c contract, q query) []string {
	text, err := expand(q.expr, d.values(true))
	if err != nil {
		return nil // reported by lintQuery
	}
	expr, err := promql.ParseExpr(text)
	if err != nil {
		// Query variables appear inside label matchers' quotes, where a
		// marker parses as well as ".*": the expression failed to parse
		// with ".*" too, and lintQuery reported it.
		return nil
	}
	_, hasPeer := d.variable("peer")
	_, hasInstance := d.variable("instance")
	var problems []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || vs.Name == "drip_build_info" {
			return nil
		}
		_, doc, ok := c.lookup(vs.Name)
		if !ok {
			return nil
		}
		need := []string{}
		if hasInstance {
			need = append(need, "instance")
		}
		if hasPeer && doc.labels["peer"] {
			need = append(need, "peer")
		}
		for _, l := range need {
			if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == l && m.Type == labels.MatchRegexp && m.Value == "<"+l+">"
			}) {
				problems = append(problems, fmt.Sprintf("%s: %s lacks %s=~\"$%s\", so the panel ignores the %s variable", q.where, vs.Name, l, l, l))
			}
		}
		return nil
	})
	return problems
}

func TestShippedDashboardsPassLint(t *testing.T) {
	problems := lint(loadDashboards(t), loadContract(t))
	require.Empty(t, problems, "dashboard problems:\n%s", strings.Join(problems, "\n"))
}

// TestShippedDashboards pins what the deployment and docs rely on: the two
// dashboards, their uids (links to them) and their variables.
func TestShippedDashboards(t *testing.T) {
	byUID := map[string]dashboard{}
	for _, d := range loadDashboards(t) {
		byUID[d.UID] = d
		require.Truef(t, strings.HasPrefix(d.Title, "drip — "), "%s: title %q", d.file, d.Title)
		ds, ok := d.variable("datasource")
		require.Truef(t, ok, "%s has no datasource variable", d.file)
		require.Equal(t, "datasource", ds.Type)
		inst, ok := d.variable("instance")
		require.Truef(t, ok, "%s has no instance variable", d.file)
		require.Equal(t, "label_values(drip_build_info, instance)", inst.queryText(), d.file)
		require.True(t, inst.Multi && inst.IncludeAll, "%s: instance must be multi-value with All", d.file)
		require.Equal(t, ".*", inst.AllValue, d.file)
	}
	require.Contains(t, byUID, "drip-mesh-overview")
	require.Contains(t, byUID, "drip-links")

	links := byUID["drip-links"]
	peer, ok := links.variable("peer")
	require.True(t, ok)
	require.Equal(t, `label_values(drip_link_up{instance=~"$instance"}, peer)`, peer.queryText())
	require.True(t, peer.Multi && peer.IncludeAll)
	bw, ok := links.variable("bandwidth")
	require.True(t, ok)
	require.Equal(t, "custom", bw.Type)
	require.Equal(t, "1000000", bw.Current.Value, "default link bandwidth in bytes/s")
}

// TestEveryDocumentedMetricHasAPanel makes a metric added to the contract
// show up on a dashboard (or fail here until it does).
func TestEveryDocumentedMetricHasAPanel(t *testing.T) {
	c := loadContract(t)
	shown := map[string]bool{}
	for _, d := range loadDashboards(t) {
		qs, _ := d.queries()
		for _, q := range qs {
			text, err := expand(q.expr, d.values(false))
			require.NoError(t, err)
			expr, err := promql.ParseExpr(text)
			require.NoError(t, err)
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					if base, _, ok := c.lookup(vs.Name); ok {
						shown[base] = true
					}
				}
				return nil
			})
		}
	}
	var missing []string
	for name := range c {
		if !shown[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "documented metrics no dashboard shows")
}

func TestParseContract(t *testing.T) {
	c := loadContract(t)
	// Spot checks of the three shapes: per link, per broker, histogram.
	require.Equal(t, metricDoc{typ: "counter", labels: map[string]bool{"job": true, "instance": true, "peer": true, "reason": true}},
		c["drip_link_dropped_bundles_total"])
	require.Equal(t, metricDoc{typ: "gauge", labels: map[string]bool{"job": true, "instance": true, "version": true, "broker": true}},
		c["drip_build_info"])
	base, doc, ok := c.lookup("drip_match_duration_seconds_bucket")
	require.True(t, ok)
	require.Equal(t, "drip_match_duration_seconds", base)
	require.True(t, doc.labels["le"] && doc.labels["stage"] && !doc.labels["peer"])
	_, _, ok = c.lookup("drip_published_messages_total_bucket")
	require.False(t, ok, "only histograms have buckets")
	_, _, ok = c.lookup("drip_match_duration_seconds")
	require.False(t, ok, "a histogram is not exposed under its bare name")

	_, err := parseContract("| `drip_x` | counter | a |\n| `drip_x` | gauge | b |\n")
	require.ErrorContains(t, err, "twice")
	_, err = parseContract("| `drip_x` | summary | a |\n")
	require.ErrorContains(t, err, "unknown type")
	_, err = parseContract("# nothing\n")
	require.Error(t, err)
}

func TestExpand(t *testing.T) {
	values := map[string]string{"__rate_interval": "1m", "instance": ".*", "bandwidth": "1000000"}
	for _, tc := range []struct{ in, want, err string }{
		{in: `rate(x{instance=~"$instance"}[$__rate_interval])`, want: `rate(x{instance=~".*"}[1m])`},
		{in: `x / ${bandwidth}`, want: `x / 1000000`},
		{in: `x{instance=~"${instance:regex}"} / [[bandwidth]]`, want: `x{instance=~".*"} / 1000000`},
		{in: `x{instance=~"$instanse"}`, err: "undefined variable $instanse"},
		{in: `x`, want: `x`},
		{in: `label_replace(x, "site", "$1", "peer", "([^/]+)/.+")`, want: `label_replace(x, "site", "$1", "peer", "([^/]+)/.+")`},
	} {
		got, err := expand(tc.in, values)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
	}
}

// TestLintCatchesBrokenDashboards breaks a minimal valid dashboard in one
// way at a time: each check must report it.
func TestLintCatchesBrokenDashboards(t *testing.T) {
	c := loadContract(t)
	raw, err := os.ReadFile("testdata/minimal.json")
	require.NoError(t, err)
	fresh := func() map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		return m
	}
	decode := func(m map[string]any) dashboard {
		data, err := json.Marshal(m)
		require.NoError(t, err)
		d, err := decodeDashboard("minimal.json", data)
		require.NoError(t, err)
		return d
	}
	require.Empty(t, lint([]dashboard{decode(fresh())}, c), "the minimal dashboard must be clean")

	panelAt := func(m map[string]any, i int) map[string]any { return m["panels"].([]any)[i].(map[string]any) }
	targetOf := func(m map[string]any) map[string]any {
		return panelAt(m, 1)["targets"].([]any)[0].(map[string]any)
	}
	setExpr := func(expr string) func(map[string]any) {
		return func(m map[string]any) { targetOf(m)["expr"] = expr }
	}
	vars := func(m map[string]any) []any { return m["templating"].(map[string]any)["list"].([]any) }

	for _, tc := range []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"unbalanced parenthesis", setExpr(`sum(rate(drip_published_messages_total{instance=~"$instance"}[$__rate_interval])`), "does not parse"},
		{"misspelt metric", setExpr(`sum(rate(drip_publishd_messages_total{instance=~"$instance"}[$__rate_interval]))`), "docs/metrics.md does not document"},
		{"histogram read by its bare name", setExpr(`drip_match_duration_seconds{instance=~"$instance"}`), "does not document"},
		{"metric outside the contract", setExpr(`up{instance=~"$instance"}`), "not a drip metric"},
		{"label the metric lacks", setExpr(`sum(rate(drip_published_messages_total{instance=~"$instance", peer="b1"}[$__rate_interval]))`), `label "peer"`},
		{"grouping by an absent label", setExpr(`sum by (stage) (rate(drip_published_messages_total{instance=~"$instance"}[$__rate_interval]))`), `by "stage"`},
		{"undefined variable", setExpr(`sum(rate(drip_published_messages_total{instance=~"$instanse"}[$__rate_interval]))`), "undefined variable $instanse"},
		{"instance filter missing", setExpr(`sum(rate(drip_published_messages_total[$__rate_interval]))`), `lacks instance=~"$instance"`},
		{"instance filter not using the variable", setExpr(`sum(rate(drip_published_messages_total{instance=~".*"}[$__rate_interval]))`), `lacks instance=~"$instance"`},
		{"peer filter missing on a link metric", setExpr(`sum(drip_link_up{instance=~"$instance"})`), `lacks peer=~"$peer"`},
		{"legend label absent", func(m map[string]any) { targetOf(m)["legendFormat"] = "{{stage}}" }, "legend uses {{stage}}"},
		{"panel on a fixed data source", func(m map[string]any) {
			panelAt(m, 1)["datasource"] = map[string]any{"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
		}, `panel "Published": data source`},
		{"target without data source", func(m map[string]any) { delete(targetOf(m), "datasource") }, "target A: data source"},
		{"variable on a fixed data source", func(m map[string]any) { delete(vars(m)[1].(map[string]any), "datasource") }, `variable "instance": data source`},
		{"no data source variable", func(m map[string]any) {
			m["templating"].(map[string]any)["list"] = vars(m)[1:]
		}, "no data source variable"},
		{"variable query not label_values", func(m map[string]any) { vars(m)[1].(map[string]any)["query"] = "drip_build_info" }, "is not label_values"},
		{"variable selector misspelt", func(m map[string]any) {
			vars(m)[1].(map[string]any)["query"] = "label_values(drip_buildinfo, instance)"
		}, `variable "instance": reads drip_buildinfo`},
		{"duplicate panel id", func(m map[string]any) { panelAt(m, 2)["id"] = 2 }, "has id 2"},
		{"overlapping panels", func(m map[string]any) {
			panelAt(m, 2)["gridPos"] = map[string]any{"h": 8, "w": 12, "x": 6, "y": 1}
		}, "overlap"},
		{"panel off the grid", func(m map[string]any) {
			panelAt(m, 2)["gridPos"] = map[string]any{"h": 8, "w": 14, "x": 12, "y": 1}
		}, "outside the 24-column grid"},
		{"no uid", func(m map[string]any) { m["uid"] = "" }, "no uid"},
		{"no drip tag", func(m map[string]any) { m["tags"] = []any{"mesh"} }, "lack \"drip\""},
		{"old schema", func(m map[string]any) { m["schemaVersion"] = 27 }, "schemaVersion 27"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fresh()
			tc.mutate(m)
			problems := lint([]dashboard{decode(m)}, c)
			require.NotEmpty(t, problems)
			require.Truef(t, slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }),
				"want a problem containing %q, got:\n%s", tc.want, strings.Join(problems, "\n"))
		})
	}

	t.Run("duplicate uid", func(t *testing.T) {
		a, b := decode(fresh()), decode(fresh())
		b.file = "copy.json"
		problems := lint([]dashboard{a, b}, c)
		require.Equal(t, []string{`copy.json: uid "drip-minimal" is also the uid of minimal.json`}, problems)
	})
	t.Run("not JSON", func(t *testing.T) {
		_, err := decodeDashboard("broken.json", raw[:len(raw)/2])
		require.ErrorContains(t, err, "not valid JSON")
	})
	t.Run("data source as a string", func(t *testing.T) {
		m := fresh()
		panelAt(m, 1)["datasource"] = "${datasource}"
		data, err := json.Marshal(m)
		require.NoError(t, err)
		_, err = decodeDashboard("old.json", data)
		require.ErrorContains(t, err, "dashboard model")
	})
}
