package pullrequest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
)

// markerPrefix starts the line comment that marks a field.
const markerPrefix = "tugboat:"

// maxYAMLFileSize bounds the files scanned for markers; larger files are
// skipped (manifests are small; this keeps a stray data file from costing
// memory).
const maxYAMLFileSize = 8 << 20

// markerKey is what a marker must name for a promotion to set its field.
type markerKey struct {
	// Pipeline is "<namespace>/<name>".
	Pipeline string
	// Environment is the destination environment.
	Environment string
}

// markerComment is the JSON carried by a marker comment.
type markerComment struct {
	Pipeline    string `json:"pipeline"`
	Environment string `json:"environment"`
}

// fieldChange is one marked field found for the promotion.
type fieldChange struct {
	// File is the path relative to the repository root, with forward slashes.
	File string
	// Line is 1-based.
	Line int
	// Old is the field's value before (unquoted).
	Old string
	// Changed is false when the field already held the version.
	Changed bool
}

// scanResult is what setVersion found and did.
type scanResult struct {
	// Fields are every field marked for the promotion, in file order.
	Fields []fieldChange
	// ChangedFiles are the files rewritten (relative, forward slashes).
	ChangedFiles []string
	// Malformed lists "file:line" of marker comments whose JSON is invalid.
	Malformed []string
}

// setVersion rewrites, in place, every YAML file under root/dir holding a
// field marked for key so that the field holds version. Files are walked
// recursively; .git and symbolic links are skipped. Returns a configuration
// error (the caller makes it terminal) when dir is not a directory of the
// repository or a marked field cannot be rewritten safely.
func setVersion(root, dir string, key markerKey, version string) (scanResult, error) {
	var res scanResult
	start, err := resolveDir(root, dir)
	if err != nil {
		return res, err
	}
	// Every file operation goes through os.Root, so nothing the repository
	// holds (a symbolic link, say) can lead outside the clone.
	r, err := os.OpenRoot(root)
	if err != nil {
		return res, err
	}
	defer func() { _ = r.Close() }()
	err = fs.WalkDir(r.FS(), start, func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !isYAMLName(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxYAMLFileSize {
			return nil
		}
		data, err := r.ReadFile(rel)
		if err != nil {
			return err
		}
		out, fields, malformed, err := rewriteYAML(rel, data, key, version)
		if err != nil {
			return err
		}
		res.Fields = append(res.Fields, fields...)
		res.Malformed = append(res.Malformed, malformed...)
		if bytes.Equal(out, data) {
			return nil
		}
		if err := r.WriteFile(rel, out, info.Mode().Perm()); err != nil {
			return err
		}
		res.ChangedFiles = append(res.ChangedFiles, rel)
		return nil
	})
	return res, err
}

// resolveDir returns dir as a slash-separated path relative to root (for
// io/fs), after checking that it is relative, stays inside root, and is a
// directory (not a link to one).
func resolveDir(root, dir string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(strings.TrimSpace(dir)))
	if clean == "." || clean == "" {
		return ".", nil
	}
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", configErrorf("path %q must be relative to the repository root and must not leave it", dir)
	}
	p := root
	for _, part := range strings.Split(clean, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return "", configErrorf("path %q does not exist in the repository", dir)
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", configErrorf("path %q goes through a symbolic link, which is not followed", dir)
		}
		if !fi.IsDir() {
			return "", configErrorf("path %q is not a directory", dir)
		}
	}
	return filepath.ToSlash(clean), nil
}

func isYAMLName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

// markedLine is a line whose marker matches the promotion.
type markedLine struct {
	index      int    // 0-based line index
	valueStart int    // byte offset of the scalar token (after tag/anchor)
	valueEnd   int    // byte offset just after it
	token      string // the scalar token as written, with its quotes
	style      byte   // '"', '\'' or 0 for plain
}

// rewriteYAML returns data with every scalar marked for key set to version,
// the marked fields, and the "file:line" of malformed markers. Only the
// bytes of the marked scalars change.
func rewriteYAML(name string, data []byte, key markerKey, version string) ([]byte, []fieldChange, []string, error) {
	if !bytes.Contains(data, []byte(markerPrefix)) {
		return data, nil, nil, nil
	}
	lines := strings.SplitAfter(string(data), "\n")
	var marked []markedLine
	var malformed []string
	for i, raw := range lines {
		line := strings.TrimRight(raw, "\r\n")
		if i == 0 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		commentAt := commentStart(line)
		if commentAt < 0 {
			continue
		}
		mc, isMarker, ok := parseMarker(line[commentAt:])
		if !isMarker {
			continue
		}
		if !ok {
			malformed = append(malformed, fmt.Sprintf("%s:%d", name, i+1))
			continue
		}
		if mc.Pipeline != key.Pipeline || mc.Environment != key.Environment {
			continue
		}
		m, err := locateScalar(line, commentAt)
		if err != nil {
			return nil, nil, nil, configErrorf("%s:%d: field marked for pipeline %s environment %s: %v", name, i+1, key.Pipeline, key.Environment, err)
		}
		m.index = i
		if i == 0 && len(line) != len(strings.TrimRight(raw, "\r\n")) {
			// Shift past the byte order mark stripped above.
			m.valueStart += len("\uFEFF")
			m.valueEnd += len("\uFEFF")
		}
		marked = append(marked, m)
	}
	if len(marked) == 0 {
		return data, nil, malformed, nil
	}
	nodes, err := scalarsByLine(data)
	if err != nil {
		return nil, nil, nil, configErrorf("%s holds a field marked for pipeline %s environment %s but is not valid YAML: %v", name, key.Pipeline, key.Environment, err)
	}
	fields := make([]fieldChange, 0, len(marked))
	for _, m := range marked {
		old, err := decodeScalar(m.token)
		if err != nil {
			return nil, nil, nil, configErrorf("%s:%d: marked value %s: %v", name, m.index+1, m.token, err)
		}
		if !hasScalar(nodes[m.index+1], old, m.style) {
			// A marker-like comment inside a block scalar or similar: text,
			// not a field.
			continue
		}
		f := fieldChange{File: name, Line: m.index + 1, Old: old}
		if old != version {
			raw := lines[m.index]
			lines[m.index] = raw[:m.valueStart] + renderScalar(version, m.style) + raw[m.valueEnd:]
			f.Changed = true
		}
		fields = append(fields, f)
	}
	return []byte(strings.Join(lines, "")), fields, malformed, nil
}

// commentStart returns the byte offset of the '#' starting the line's
// comment, or -1. A '#' starts a comment at the start of the line or after
// whitespace, outside quoted scalars.
func commentStart(line string) int {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch quote {
		case '"':
			switch c {
			case '\\':
				i++
			case '"':
				quote = 0
			}
			continue
		case '\'':
			if c == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
				} else {
					quote = 0
				}
			}
			continue
		}
		atTokenStart := i == 0 || strings.IndexByte(" \t[{,", line[i-1]) >= 0
		switch {
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return i
		case (c == '"' || c == '\'') && atTokenStart:
			quote = c
		}
	}
	return -1
}

// parseMarker reports whether comment (starting with '#') is a tugboat
// marker and, if so, whether its JSON is valid.
func parseMarker(comment string) (mc markerComment, isMarker, ok bool) {
	text := strings.TrimSpace(strings.TrimPrefix(comment, "#"))
	if !strings.HasPrefix(text, markerPrefix) {
		return mc, false, false
	}
	body := strings.TrimSpace(strings.TrimPrefix(text, markerPrefix))
	if err := json.Unmarshal([]byte(body), &mc); err != nil || mc.Pipeline == "" || mc.Environment == "" {
		return mc, true, false
	}
	return mc, true, true
}

// locateScalar finds the scalar token that ends before the comment at
// commentAt: the value of "key: value", "- value" or "- key: value", after
// any tag or anchor.
func locateScalar(line string, commentAt int) (markedLine, error) {
	content := strings.TrimRight(line[:commentAt], " \t")
	start := valueStart(content)
	if start < 0 {
		return markedLine{}, errors.New("the marker must follow a scalar value on the same line (key: value or - value)")
	}
	// Skip node properties: tags (!tag, !!str) and anchors (&name).
	for start < len(content) && (content[start] == '!' || content[start] == '&') {
		end := strings.IndexAny(content[start:], " \t")
		if end < 0 {
			return markedLine{}, errors.New("no value after the tag or anchor")
		}
		start += end
		for start < len(content) && (content[start] == ' ' || content[start] == '\t') {
			start++
		}
	}
	token := content[start:]
	m := markedLine{valueStart: start, valueEnd: len(content), token: token}
	switch {
	case token == "":
		return m, errors.New("the value is empty")
	case token[0] == '"' || token[0] == '\'':
		m.style = token[0]
	case strings.IndexByte("|>", token[0]) >= 0:
		return m, errors.New("block scalars are not supported; mark a single-line value")
	case strings.IndexByte("[{", token[0]) >= 0:
		return m, errors.New("the value is a collection, not a scalar")
	case token[0] == '*':
		return m, errors.New("the value is an alias; mark the anchored value instead")
	}
	return m, nil
}

// valueStart returns the offset of the value in a "key: value", "- value"
// or "- key: value" line (content has no comment and no trailing space), or
// -1 when the line holds no value.
func valueStart(content string) int {
	i := 0
	for i < len(content) && (content[i] == ' ' || content[i] == '\t') {
		i++
	}
	// Sequence entries, possibly nested ("- - value").
	for i+1 < len(content) && content[i] == '-' && (content[i+1] == ' ' || content[i+1] == '\t') {
		i += 2
		for i < len(content) && (content[i] == ' ' || content[i] == '\t') {
			i++
		}
	}
	seqValue := i
	// The mapping indicator: the first ':' followed by whitespace, outside
	// quotes.
	var quote byte
	for j := i; j < len(content); j++ {
		c := content[j]
		switch quote {
		case '"':
			switch c {
			case '\\':
				j++
			case '"':
				quote = 0
			}
			continue
		case '\'':
			if c == '\'' {
				if j+1 < len(content) && content[j+1] == '\'' {
					j++
				} else {
					quote = 0
				}
			}
			continue
		}
		if (c == '"' || c == '\'') && (j == i || content[j-1] == ' ' || content[j-1] == '\t') {
			quote = c
			continue
		}
		if c == ':' && (j+1 == len(content) || content[j+1] == ' ' || content[j+1] == '\t') {
			k := j + 1
			for k < len(content) && (content[k] == ' ' || content[k] == '\t') {
				k++
			}
			if k == len(content) {
				return -1
			}
			return k
		}
	}
	if seqValue > 0 && seqValue < len(content) && strings.TrimLeft(content[:seqValue], " \t") != "" {
		return seqValue
	}
	return -1
}

// decodeScalar returns the value of a single-line scalar token.
func decodeScalar(token string) (string, error) {
	switch token[0] {
	case '"', '\'':
		var s string
		if err := yamlv3.Unmarshal([]byte(token), &s); err != nil {
			return "", err
		}
		return s, nil
	}
	return token, nil
}

// scalarsByLine parses every document of data and indexes its scalar nodes
// by line.
func scalarsByLine(data []byte) (map[int][]*yamlv3.Node, error) {
	nodes := map[int][]*yamlv3.Node{}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nodes, nil
		}
		if err != nil {
			return nil, err
		}
		var walk func(n *yamlv3.Node)
		walk = func(n *yamlv3.Node) {
			if n.Kind == yamlv3.ScalarNode {
				nodes[n.Line] = append(nodes[n.Line], n)
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&doc)
	}
}

// hasScalar reports whether one of nodes is a single-line scalar with the
// value and quoting style.
func hasScalar(nodes []*yamlv3.Node, value string, style byte) bool {
	for _, n := range nodes {
		if n.Value != value || n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
			continue
		}
		switch style {
		case '"':
			if n.Style&yamlv3.DoubleQuotedStyle != 0 {
				return true
			}
		case '\'':
			if n.Style&yamlv3.SingleQuotedStyle != 0 {
				return true
			}
		default:
			if n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle) == 0 {
				return true
			}
		}
	}
	return false
}

// renderScalar writes value in the style of the scalar it replaces. A plain
// scalar stays plain unless YAML would read the value as something other
// than that string (1.10 is a float, yes a boolean in YAML 1.1), in which
// case it is double-quoted so its type stays string.
func renderScalar(value string, style byte) string {
	switch style {
	case '\'':
		return "'" + strings.ReplaceAll(value, "'", "''") + "'"
	case '"':
		return strconv.Quote(value)
	}
	if plainIsString(value) {
		return value
	}
	return strconv.Quote(value)
}

// plainIsString reports whether value, written as a plain scalar, reads back
// as the same string under both YAML 1.2 (yaml.v3) and YAML 1.1 (yaml.v2,
// which sigs.k8s.io/yaml and so Kubernetes tooling use).
func plainIsString(value string) bool {
	if value == "" || strings.ContainsAny(value, "#:\"'\n\r\t") || strings.TrimSpace(value) != value {
		return false
	}
	doc := []byte("v: " + value)
	var m3 map[string]any
	if err := yamlv3.Unmarshal(doc, &m3); err != nil {
		return false
	}
	if s, ok := m3["v"].(string); !ok || s != value {
		return false
	}
	var m2 map[string]any
	if err := yamlv2.Unmarshal(doc, &m2); err != nil {
		return false
	}
	s, ok := m2["v"].(string)
	return ok && s == value
}
