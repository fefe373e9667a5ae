//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
)

// DoctorRun runs every doctor check against the hub cfg points at, in
// namespace ("" for all), expecting group/version to serve kinds (plural →
// Kind; nil for tugboat.dev/v1alpha1's), and returns the findings and what
// the command would return (non-nil: exit status 1). failOn is "error" or
// "warning".
func DoctorRun(ctx context.Context, cfg *rest.Config, namespace, group, version string, kinds [][2]string, failOn string) ([]Finding, error) {
	c, err := client.New(cfg, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		return nil, err
	}
	opts := defaultDoctorOptions()
	if err := opts.failOn.Set(failOn); err != nil {
		return nil, err
	}
	d, err := newDoctor(cfg, c, opts, namespace)
	if err != nil {
		return nil, err
	}
	d.group, d.version = group, version
	for _, k := range kinds {
		d.kinds = append(d.kinds, tugboatKind{plural: k[0], kind: k[1]})
	}
	findings := d.run(ctx)
	return findings, doctorVerdict(findings, opts.failOn)
}

// DoctorSourceCodes returns every finding code declared in the package's
// source (constants of type findingCode), and an error when a finding is
// made with a code that is not such a constant (a literal, say), so that
// every code doctor can emit is in the list.
func DoctorSourceCodes() ([]string, error) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	declared := map[string]string{} // constant name → code
	var used []string               // constant names passed to add
	var problems []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "findingCode" {
					for i, v := range n.Values {
						lit, ok := v.(*ast.BasicLit)
						if !ok {
							problems = append(problems, fmt.Sprintf("%s: code %s is not a string literal", fset.Position(v.Pos()), n.Names[i].Name))
							continue
						}
						s, _ := strconv.Unquote(lit.Value)
						declared[n.Names[i].Name] = s
					}
				}
			case *ast.CallExpr:
				// d.add(check, code, ...) and the promotion check's add(code, ...).
				var arg ast.Expr
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					if fn.Sel.Name == "add" && len(n.Args) == 6 {
						arg = n.Args[1]
					}
				case *ast.Ident:
					if fn.Name == "add" && len(n.Args) == 5 {
						arg = n.Args[0]
					}
				}
				if arg == nil {
					return true
				}
				id, ok := arg.(*ast.Ident)
				if !ok {
					problems = append(problems, fmt.Sprintf("%s: a finding's code must be a findingCode constant", fset.Position(arg.Pos())))
					return true
				}
				used = append(used, id.Name)
			}
			return true
		})
	}
	for _, u := range used {
		if _, ok := declared[u]; !ok && u != "code" {
			problems = append(problems, fmt.Sprintf("finding code %s is not a findingCode constant", u))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	codes := make([]string, 0, len(declared))
	seen := map[string]string{}
	for name, c := range declared {
		if other, dup := seen[c]; dup {
			return nil, fmt.Errorf("finding code %q is declared twice: %s and %s", c, other, name)
		}
		seen[c] = name
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes, nil
}
