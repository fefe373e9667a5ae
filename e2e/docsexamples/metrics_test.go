package docsexamples

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

const promImport = `"github.com/prometheus/client_golang/prometheus"`

// metricKind is what a metric is, from the Opts type that defines it.
var metricKind = map[string]string{
	"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary",
}

// exportedMetrics finds every Prometheus metric the code defines: the
// composite literals prometheus.CounterOpts{...} (and Gauge, Histogram,
// Summary) of the non-test Go files, with Namespace, Subsystem and Name
// evaluated from string literals and the package's string constants. It
// returns each full name with its kind.
func exportedMetrics(root string) (map[string]string, error) {
	byDir := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "bin", "testdata", ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	metrics := map[string]string{}
	for _, files := range byDir {
		fset := token.NewFileSet()
		var parsed []*ast.File
		usesProm := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if !strings.Contains(string(src), promImport) {
				parsed = append(parsed, nil)
				continue
			}
			usesProm = true
			af, err := parser.ParseFile(fset, f, src, 0)
			if err != nil {
				return nil, err
			}
			parsed = append(parsed, af)
		}
		if !usesProm {
			continue
		}
		// The package's string constants, from every file of the directory.
		consts := map[string]ast.Expr{}
		for i, f := range files {
			af := parsed[i]
			if af == nil {
				var err error
				if af, err = parser.ParseFile(fset, f, nil, 0); err != nil {
					return nil, err
				}
			}
			for _, decl := range af.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for j, name := range vs.Names {
						if j < len(vs.Values) {
							consts[name.Name] = vs.Values[j]
						}
					}
				}
			}
		}
		for _, af := range parsed {
			if af == nil {
				continue
			}
			var walkErr error
			ast.Inspect(af, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := lit.Type.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				kind, isOpts := metricKind[sel.Sel.Name]
				if !ok || pkg.Name != "prometheus" || !isOpts {
					return true
				}
				parts := map[string]string{}
				for _, elt := range lit.Elts {
					kv, ok := elt.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key := kv.Key.(*ast.Ident).Name
					if key != "Namespace" && key != "Subsystem" && key != "Name" {
						continue
					}
					v, err := evalString(kv.Value, consts, 0)
					if err != nil {
						walkErr = fmt.Errorf("%s: %s: %w", fset.Position(kv.Pos()), key, err)
						return false
					}
					parts[key] = v
				}
				var name []string
				for _, k := range []string{"Namespace", "Subsystem", "Name"} {
					if parts[k] != "" {
						name = append(name, parts[k])
					}
				}
				metrics[strings.Join(name, "_")] = kind
				return true
			})
			if walkErr != nil {
				return nil, walkErr
			}
		}
	}
	return metrics, nil
}

// evalString evaluates a constant string expression: literals, constants
// and +.
func evalString(e ast.Expr, consts map[string]ast.Expr, depth int) (string, error) {
	if depth > 10 {
		return "", fmt.Errorf("constant too deep")
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return evalString(v, consts, depth+1)
		}
		return "", fmt.Errorf("%s is not a string constant of the package", e.Name)
	case *ast.ParenExpr:
		return evalString(e.X, consts, depth+1)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, err := evalString(e.X, consts, depth+1)
			if err != nil {
				return "", err
			}
			b, err := evalString(e.Y, consts, depth+1)
			return a + b, err
		}
	}
	return "", fmt.Errorf("cannot evaluate %T: name metrics with string constants", e)
}

// repoMetrics is exportedMetrics of the repository, scanned once.
var repoMetrics = sync.OnceValues(func() (map[string]string, error) { return exportedMetrics(repoRoot) })

// TestOperationsDoc_listsEveryMetric keeps docs/operations.md true: every
// metric the hub and the agent define is listed there (as `name`), and
// nothing is listed that the code does not define.
func TestOperationsDoc_listsEveryMetric(t *testing.T) {
	metrics, err := repoMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if len(metrics) < 30 {
		t.Fatalf("found only %d metrics in the code: is the scan broken? %v", len(metrics), metrics)
	}
	data, err := os.ReadFile(filepath.Join(docsDir, "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	names := make([]string, 0, len(metrics))
	for name := range metrics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/operations.md does not list the %s `%s`", metrics[name], name)
		}
	}
	// Every `tugboat_...` of the metrics tables is one the code defines.
	for _, m := range regexp.MustCompile("(?m)^\\| `(tugboat_[a-z0-9_]+)`").FindAllStringSubmatch(doc, -1) {
		if _, ok := metrics[m[1]]; !ok {
			t.Errorf("docs/operations.md lists `%s`, which no code defines", m[1])
		}
	}
}

// TestExportedMetrics_evaluatesNamesLikeTheRegistry checks the scan on a
// package written for it.
func TestExportedMetrics_evaluatesNamesLikeTheRegistry(t *testing.T) {
	dir := t.TempDir()
	src := `package m

import "github.com/prometheus/client_golang/prometheus"

const sub = "tugboat_x"

var (
	a = prometheus.NewCounter(prometheus.CounterOpts{Name: sub + "_total", Help: "h"})
	b = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tugboat", Subsystem: "y", Name: "seconds", Help: "h"})
	c = prometheus.NewGauge(prometheus.GaugeOpts{Name: ("tugboat_" + "up"), Help: "h"})
)
`
	if err := os.WriteFile(filepath.Join(dir, "m.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := exportedMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tugboat_x_total": "counter", "tugboat_y_seconds": "histogram", "tugboat_up": "gauge"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	bad := strings.Replace(src, `Name: sub + "_total"`, `Name: fmt.Sprint(1)`, 1)
	if err := os.WriteFile(filepath.Join(dir, "m.go"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := exportedMetrics(dir); err == nil {
		t.Fatal("a name that is not a constant must be an error, not a metric silently missed")
	}
}

// Prometheus rule files, as the PrometheusRule CRD (monitoring.coreos.com/v1)
// and Prometheus's own rule files hold them.
type (
	promRuleObject struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       promRuleFile   `json:"spec"`
	}
	promRuleFile struct {
		Groups []promGroup `json:"groups"`
	}
	promGroup struct {
		Name     string     `json:"name"`
		Interval string     `json:"interval,omitempty"`
		Rules    []promRule `json:"rules"`
	}
	promRule struct {
		Alert         string            `json:"alert,omitempty"`
		Record        string            `json:"record,omitempty"`
		Expr          string            `json:"expr"`
		For           string            `json:"for,omitempty"`
		KeepFiringFor string            `json:"keep_firing_for,omitempty"`
		Labels        map[string]string `json:"labels,omitempty"`
		Annotations   map[string]string `json:"annotations,omitempty"`
	}
)

var (
	promDurationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	tugboatNameRE  = regexp.MustCompile(`\btugboat_[a-z0-9_]+\b`)
	byLabelsRE     = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelNameRE    = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// checkAlertRules validates Prometheus alerting rules: a PrometheusRule
// object, a rule file (groups:) or a bare list of rules. Fields are decoded
// strictly; every rule has alert or record and an expr; durations are
// Prometheus durations; brackets balance; every tugboat_ metric an expr
// uses is one the code defines (with _bucket, _sum or _count for
// histograms).
func checkAlertRules(text string) error {
	metrics, err := repoMetrics()
	if err != nil {
		return err
	}
	var groups []promGroup
	trimmed := strings.TrimSpace(text)
	switch {
	case strings.HasPrefix(trimmed, "-"):
		var rules []promRule
		if err := sigsyaml.UnmarshalStrict([]byte(text), &rules); err != nil {
			return fmt.Errorf("rules: %w", err)
		}
		groups = []promGroup{{Name: "example", Rules: rules}}
	case strings.Contains(text, "kind: PrometheusRule"):
		var obj promRuleObject
		if err := sigsyaml.UnmarshalStrict([]byte(text), &obj); err != nil {
			return fmt.Errorf("PrometheusRule: %w", err)
		}
		if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" || obj.Metadata["name"] == nil {
			return fmt.Errorf("PrometheusRule: want apiVersion monitoring.coreos.com/v1, kind PrometheusRule and metadata.name")
		}
		groups = obj.Spec.Groups
	default:
		var file promRuleFile
		if err := sigsyaml.UnmarshalStrict([]byte(text), &file); err != nil {
			return fmt.Errorf("rule file: %w", err)
		}
		groups = file.Groups
	}
	if len(groups) == 0 {
		return fmt.Errorf("no rule groups")
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if g.Name == "" || len(g.Rules) == 0 {
			return fmt.Errorf("group %q: a group needs a name and rules", g.Name)
		}
		if g.Interval != "" && !promDurationRE.MatchString(g.Interval) {
			return fmt.Errorf("group %s: interval %q is not a Prometheus duration", g.Name, g.Interval)
		}
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			switch {
			case (r.Alert == "") == (r.Record == ""):
				return fmt.Errorf("group %s: a rule has exactly one of alert and record", g.Name)
			case strings.TrimSpace(r.Expr) == "":
				return fmt.Errorf("rule %s: no expr", name)
			case r.For != "" && !promDurationRE.MatchString(r.For):
				return fmt.Errorf("rule %s: for %q is not a Prometheus duration", name, r.For)
			case r.KeepFiringFor != "" && !promDurationRE.MatchString(r.KeepFiringFor):
				return fmt.Errorf("rule %s: keep_firing_for %q is not a Prometheus duration", name, r.KeepFiringFor)
			case r.Alert != "" && seen[r.Alert]:
				return fmt.Errorf("alert %s: defined twice", r.Alert)
			}
			seen[r.Alert] = r.Alert != ""
			if err := balanced(r.Expr); err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
			for _, m := range byLabelsRE.FindAllStringSubmatch(r.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); l != "" && !labelNameRE.MatchString(l) {
						return fmt.Errorf("rule %s: %q is not a label name", name, l)
					}
				}
			}
			for _, used := range tugboatNameRE.FindAllString(r.Expr, -1) {
				if !metricDefined(metrics, used) {
					return fmt.Errorf("rule %s: no code defines the metric %s", name, used)
				}
			}
		}
	}
	return nil
}

func metricDefined(metrics map[string]string, name string) bool {
	if _, ok := metrics[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (metrics[base] == "histogram" || metrics[base] == "summary") {
			return true
		}
	}
	return false
}

// balanced checks (), {} and [] outside quoted strings.
func balanced(expr string) error {
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	var quote rune
	for _, c := range expr {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '(' || c == '{' || c == '[':
			stack = append(stack, c)
		case pairs[c] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return fmt.Errorf("unbalanced %q in expr", c)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || quote != 0 {
		return fmt.Errorf("unclosed bracket or quote in expr")
	}
	return nil
}

// TestAlertRules_checkCanFail shows checkAlertRules refusing wrong rules.
func TestAlertRules_checkCanFail(t *testing.T) {
	cases := map[string]string{
		"unknown metric":    "- alert: A\n  expr: tugboat_nonexistent_total > 0\n",
		"misspelled field":  "- alert: A\n  expression: up == 0\n  expr: up == 0\n",
		"bad duration":      "- alert: A\n  expr: up == 0\n  for: 5 minutes\n",
		"unbalanced":        "- alert: A\n  expr: sum(rate(tugboat_promotions_total[5m]) > 0\n",
		"no expr":           "- alert: A\n",
		"bucket of counter": "- alert: A\n  expr: tugboat_promotions_total_bucket > 0\n",
		"wrong apiVersion":  "apiVersion: monitoring.coreos.com/v2\nkind: PrometheusRule\nmetadata: {name: x}\nspec:\n  groups: [{name: g, rules: [{alert: A, expr: up == 0}]}]\n",
	}
	for name, text := range cases {
		if err := checkAlertRules(text); err == nil {
			t.Errorf("%s: accepted:\n%s", name, text)
		}
	}
	ok := "- alert: A\n  expr: histogram_quantile(0.99, sum by (le) (rate(tugboat_promotion_decision_seconds_bucket[5m]))) > 1\n  for: 10m\n"
	if err := checkAlertRules(ok); err != nil {
		t.Errorf("a valid rule was refused: %v", err)
	}
}
