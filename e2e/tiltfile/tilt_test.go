package tiltfile_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/config"
)

// tilt stands in for Tilt's Starlark API: each function the Tiltfile calls
// records its arguments, with Tilt's parameter names (an unknown keyword
// fails the run, as it would in Tilt).
type tilt struct {
	root  string
	flags map[string]string // --name=value; a bare --name is "true"

	docker    []dockerBuild
	yaml      []*unstructured.Unstructured
	resources []k8sResource
	locals    []localResource
	contexts  []string
	helmed    []string
	defined   map[string]string // config flag → kind
}

type dockerBuild struct {
	Ref, Context, Dockerfile, Target string
	BuildArgs                        map[string]string
	Only, Ignore                     []string
}

type k8sResource struct {
	Workload, NewName                   string
	PortForwards, Objects, ResourceDeps []string
	Labels                              []string
}

type localResource struct {
	Name, Cmd                    string
	ServeCmd, Deps, ResourceDeps []string
	Ignore, Labels               []string
}

// run executes the Tiltfile at root with the given config flags (what
// follows `tilt up --`).
func run(t *testing.T, root string, args ...string) *tilt {
	t.Helper()
	tl := &tilt{root: root, flags: map[string]string{}, defined: map[string]string{}}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			value = "true"
		}
		tl.flags[name] = value
	}
	thread := &starlark.Thread{Name: "Tiltfile", Print: func(_ *starlark.Thread, msg string) { t.Log(msg) }}
	// The dialect Tilt enables.
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
	if _, err := starlark.ExecFileOptions(opts, thread, filepath.Join(root, "Tiltfile"), nil, tl.predeclared()); err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			t.Fatalf("running the Tiltfile %v: %s", args, ee.Backtrace())
		}
		t.Fatalf("running the Tiltfile %v: %v", args, err)
	}
	return tl
}

func (tl *tilt) predeclared() starlark.StringDict {
	b := func(name string, fn func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)) *starlark.Builtin {
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			return fn(args, kwargs)
		})
	}
	return starlark.StringDict{
		"config": &starlarkstruct.Module{Name: "config", Members: starlark.StringDict{
			"define_bool":        b("config.define_bool", tl.define("bool")),
			"define_string":      b("config.define_string", tl.define("string")),
			"define_string_list": b("config.define_string_list", tl.define("string_list")),
			"parse":              b("config.parse", tl.parse),
		}},
		"helm":               b("helm", tl.helm),
		"decode_yaml_stream": b("decode_yaml_stream", decodeYAMLStream),
		"encode_yaml_stream": b("encode_yaml_stream", encodeYAMLStream),
		"encode_yaml":        b("encode_yaml", encodeYAML),
		"k8s_yaml":           b("k8s_yaml", tl.k8sYAML),
		"docker_build":       b("docker_build", tl.dockerBuild),
		"k8s_resource":       b("k8s_resource", tl.k8sResource),
		"local_resource":     b("local_resource", tl.localResource),
		"allow_k8s_contexts": b("allow_k8s_contexts", tl.allowContexts),
	}
}

func (tl *tilt) define(kind string) func(starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, usage string
		var positional bool
		if err := starlark.UnpackArgs("config.define_"+kind, args, kwargs, "name", &name, "args?", &positional, "usage?", &usage); err != nil {
			return nil, err
		}
		if usage == "" {
			return nil, fmt.Errorf("config flag %s has no usage", name)
		}
		tl.defined[name] = kind
		return starlark.None, nil
	}
}

// parse returns the flags given, typed as defined; an undefined flag is an
// error, as in Tilt.
func (tl *tilt) parse(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs("config.parse", args, kwargs); err != nil {
		return nil, err
	}
	d := starlark.NewDict(len(tl.flags))
	for name, value := range tl.flags {
		var v starlark.Value
		switch tl.defined[name] {
		case "bool":
			v = starlark.Bool(value == "true")
		case "string":
			v = starlark.String(value)
		case "string_list":
			var l []starlark.Value
			for _, s := range strings.Split(value, ",") {
				l = append(l, starlark.String(s))
			}
			v = starlark.NewList(l)
		default:
			return nil, fmt.Errorf("config.parse: flag --%s is not defined", name)
		}
		if err := d.SetKey(starlark.String(name), v); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// helm renders the real chart with the given values, as Tilt's helm()
// runs `helm template` (the chart must be one of the embedded ones, at the
// path it has in the repository).
func (tl *tilt) helm(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path, name, namespace string
	var set *starlark.List
	if err := starlark.UnpackArgs("helm", args, kwargs, "paths", &path, "name?", &name, "namespace?", &namespace, "set?", &set); err != nil {
		return nil, err
	}
	tl.helmed = append(tl.helmed, path)
	chart := filepath.Base(path)
	if filepath.Join(tl.root, path) != filepath.Join(tl.root, "config", "charts", chart) || name != chart {
		return nil, fmt.Errorf("helm %s (name %s): not a chart of config/charts installed under its own name", path, name)
	}
	values := map[string]any{}
	if set != nil {
		for i := range set.Len() {
			kv, ok := starlark.AsString(set.Index(i))
			if !ok {
				return nil, fmt.Errorf("helm %s: set holds %s, not a string", path, set.Index(i))
			}
			if err := strvals.ParseInto(kv, values); err != nil {
				return nil, fmt.Errorf("helm %s: set %q: %w", path, kv, err)
			}
		}
	}
	objs, err := config.Render(chart, namespace, values)
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w", path, err)
	}
	var out strings.Builder
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return starlark.String(out.String()), nil
}

func (tl *tilt) k8sYAML(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs("k8s_yaml", args, kwargs, "yaml", &s); err != nil {
		return nil, err
	}
	objs, err := decodeObjects(s)
	if err != nil {
		return nil, fmt.Errorf("k8s_yaml: %w", err)
	}
	tl.yaml = append(tl.yaml, objs...)
	return starlark.None, nil
}

func (tl *tilt) dockerBuild(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var d dockerBuild
	var buildArgs *starlark.Dict
	var only, ignore *starlark.List
	if err := starlark.UnpackArgs("docker_build", args, kwargs, "ref", &d.Ref, "context", &d.Context,
		"build_args?", &buildArgs, "dockerfile?", &d.Dockerfile, "target?", &d.Target, "only?", &only, "ignore?", &ignore); err != nil {
		return nil, err
	}
	d.BuildArgs = map[string]string{}
	if buildArgs != nil {
		for _, kv := range buildArgs.Items() {
			k, _ := starlark.AsString(kv[0])
			v, _ := starlark.AsString(kv[1])
			d.BuildArgs[k] = v
		}
	}
	var err error
	if d.Only, err = stringList(only); err != nil {
		return nil, err
	}
	if d.Ignore, err = stringList(ignore); err != nil {
		return nil, err
	}
	tl.docker = append(tl.docker, d)
	return starlark.None, nil
}

func (tl *tilt) k8sResource(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var r k8sResource
	var pf, objs, deps, labels *starlark.List
	if err := starlark.UnpackArgs("k8s_resource", args, kwargs, "workload?", &r.Workload, "new_name?", &r.NewName,
		"port_forwards?", &pf, "objects?", &objs, "resource_deps?", &deps, "labels?", &labels); err != nil {
		return nil, err
	}
	var err error
	for dst, src := range map[*[]string]*starlark.List{&r.PortForwards: pf, &r.Objects: objs, &r.ResourceDeps: deps, &r.Labels: labels} {
		if *dst, err = stringList(src); err != nil {
			return nil, err
		}
	}
	tl.resources = append(tl.resources, r)
	return starlark.None, nil
}

func (tl *tilt) localResource(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var r localResource
	var serve, deps, rdeps, ignore, labels *starlark.List
	if err := starlark.UnpackArgs("local_resource", args, kwargs, "name", &r.Name, "cmd?", &r.Cmd, "deps?", &deps,
		"ignore?", &ignore, "serve_cmd?", &serve, "resource_deps?", &rdeps, "labels?", &labels); err != nil {
		return nil, err
	}
	var err error
	for dst, src := range map[*[]string]*starlark.List{&r.ServeCmd: serve, &r.Deps: deps, &r.ResourceDeps: rdeps, &r.Ignore: ignore, &r.Labels: labels} {
		if *dst, err = stringList(src); err != nil {
			return nil, err
		}
	}
	tl.locals = append(tl.locals, r)
	return starlark.None, nil
}

func (tl *tilt) allowContexts(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var l *starlark.List
	if err := starlark.UnpackArgs("allow_k8s_contexts", args, kwargs, "contexts", &l); err != nil {
		return nil, err
	}
	s, err := stringList(l)
	tl.contexts = append(tl.contexts, s...)
	return starlark.None, err
}

// stringList converts a Starlark list of strings.
func stringList(l *starlark.List) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	out := make([]string, 0, l.Len())
	for i := range l.Len() {
		s, ok := starlark.AsString(l.Index(i))
		if !ok {
			return nil, fmt.Errorf("want a list of strings, got %s", l.Index(i).Type())
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeObjects splits a YAML stream into objects (integers as int64).
func decodeObjects(s string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
}

// decodeYAMLStream is Tilt's decode_yaml_stream: a list of dicts, through
// JSON with the Starlark json module.
func decodeYAMLStream(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs("decode_yaml_stream", args, kwargs, "yaml", &s); err != nil {
		return nil, err
	}
	objs, err := decodeObjects(s)
	if err != nil {
		return nil, err
	}
	var l []starlark.Value
	for _, o := range objs {
		j, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		v, err := jsonCall("decode", starlark.String(j))
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
	return starlark.NewList(l), nil
}

func encodeYAMLStream(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var l *starlark.List
	if err := starlark.UnpackArgs("encode_yaml_stream", args, kwargs, "objs", &l); err != nil {
		return nil, err
	}
	var docs []string
	for i := range l.Len() {
		y, err := toYAML(l.Index(i))
		if err != nil {
			return nil, err
		}
		docs = append(docs, y)
	}
	return starlark.String(strings.Join(docs, "---\n")), nil
}

func encodeYAML(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackArgs("encode_yaml", args, kwargs, "obj", &v); err != nil {
		return nil, err
	}
	y, err := toYAML(v)
	return starlark.String(y), err
}

func toYAML(v starlark.Value) (string, error) {
	j, err := jsonCall("encode", v)
	if err != nil {
		return "", err
	}
	y, err := yaml.JSONToYAML([]byte(j.(starlark.String)))
	return string(y), err
}

func jsonCall(fn string, arg starlark.Value) (starlark.Value, error) {
	return starlark.Call(&starlark.Thread{}, starlarkjson.Module.Members[fn], starlark.Tuple{arg}, nil)
}
