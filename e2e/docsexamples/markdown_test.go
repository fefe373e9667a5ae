package docsexamples

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Block is one fenced code block of a Markdown page.
type Block struct {
	// File is the page's path, Line the line of the opening fence (1-based).
	File string
	Line int
	// Lang is the fence's info string (yaml, sh, ...).
	Lang string
	// Marker is the kind of example an HTML comment right above the fence
	// declares (<!-- example: KIND -->), "" without one.
	Marker string
	// Text is the block's content, without the fences.
	Text string
}

// Where names the block for failure messages.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var markerRE = regexp.MustCompile(`^<!--\s*example:\s*([a-z-]+)\b.*-->$`)

// ParseBlocks returns the fenced code blocks of a Markdown document. A fence
// is a line starting with ``` (after up to three spaces); an unclosed block
// is an error.
func ParseBlocks(file string, data []byte) ([]Block, error) {
	var (
		blocks   []Block
		cur      *Block
		body     strings.Builder
		lastText string // the last non-blank line outside a block
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		isFence := strings.HasPrefix(strings.TrimLeft(line, " "), "```") && len(line)-len(strings.TrimLeft(line, " ")) <= 3
		switch {
		case cur == nil && isFence:
			cur = &Block{File: file, Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			if m := markerRE.FindStringSubmatch(lastText); m != nil {
				cur.Marker = m[1]
			}
			body.Reset()
		case cur != nil && isFence && trimmed == "```":
			cur.Text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
			lastText = ""
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		case trimmed != "":
			lastText = trimmed
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block not closed", file, cur.Line)
	}
	return blocks, nil
}

// DocBlocks returns the blocks of every page of dir (*.md), in file order.
func DocBlocks(dir string) ([]Block, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var all []Block
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := f
		if rel, err := filepath.Rel(repoRoot, f); err == nil {
			name = rel // docs/x.md in messages
		}
		blocks, err := ParseBlocks(filepath.ToSlash(name), data)
		if err != nil {
			return nil, err
		}
		all = append(all, blocks...)
	}
	return all, nil
}
