package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"

	"gopkg.in/yaml.v3"
)

// Bounds on the work a config may ask of the parser before training
// starts. The presets are under 2 KB, three levels deep and have at most
// 40 keys in a section, so the limits leave ample room for comments and
// anchors while refusing inputs that would make the YAML decoder run for
// seconds.
const (
	// MaxConfigBytes is the largest config file (or --set value) read.
	MaxConfigBytes = 1 << 20
	// MaxDepth is the deepest nesting of sections and lists, aliases
	// expanded; the schema itself is three levels deep.
	MaxDepth = 32
	// MaxEntries is the most keys of one section or items of one list.
	MaxEntries = 1000
	// MaxNodes is the most values in a config, aliases expanded: yaml.v3
	// decodes an alias's value again at every use, and compares every pair
	// of keys of each mapping it decodes.
	MaxNodes = 10000
)

// decodeStrict decodes one YAML document with unknown keys as errors,
// after checking it against the limits above and for duplicate keys, into
// the value that target returns for the document's node tree; names
// (sectionNames) words the errors. Number fields are held to their types
// first (checkNumbers), and the line of every key is returned by its
// dotted path. yaml.v3 looks for duplicate keys by
// comparing every pair of keys of a mapping and writes one message per
// duplicate pair, so a mapping of n equal keys costs it n²/2 messages (one
// second at n = 1,000, minutes at 10,000); the check here reports the
// first duplicate only, in one pass. The document is parsed twice, to
// nodes and then strictly; both passes are linear in its size.
func decodeStrict(data []byte, target func(doc *yaml.Node) (out any, names map[string]string)) (lines map[string]int, err error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%d bytes, more than the %s a config may have", len(data), sizeWord(MaxConfigBytes))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errEmpty
		}
		return nil, cleanYAMLError(err, nil)
	}
	var lc limitChecker
	if _, err := lc.check(&doc, 0); err != nil {
		return nil, err
	}
	out, names := target(&doc)
	if lines, err = checkNumbers(&doc, reflect.TypeOf(out)); err != nil {
		return nil, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(out); err != nil {
		return nil, cleanYAMLError(err, names)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("line %d: a second YAML document; a config is one document", extra.Line)
	}
	return lines, nil
}

// decodeValue is decodeStrict into out.
func decodeValue(data []byte, out any) error {
	_, err := decodeStrict(data, func(*yaml.Node) (any, map[string]string) { return out, nil })
	return err
}

var errEmpty = errors.New("empty config")

// limitChecker walks a node tree once, remembering the size and height of
// every node it has finished, so that an alias costs what its value costs
// without being walked again.
type limitChecker struct {
	done  map[*yaml.Node]extent
	nodes int // values so far, aliases expanded
}

// extent is a finished node's size (values, aliases expanded) and height.
type extent struct{ size, height int }

// check walks n at nesting depth depth and returns its extent, or the
// first limit it breaks.
func (lc *limitChecker) check(n *yaml.Node, depth int) (extent, error) {
	if n.Kind == yaml.AliasNode {
		// An anchor precedes its aliases, so its value is finished unless
		// the alias lies inside it; the decoder refuses that recursion.
		e := lc.done[n.Alias]
		e.size = max(e.size, 1)
		if depth+e.height > MaxDepth {
			return e, fmt.Errorf("line %d: alias *%s nests its value more than %d deep", n.Line, n.Value, MaxDepth)
		}
		if lc.nodes += e.size; lc.nodes > MaxNodes {
			return e, fmt.Errorf("line %d: alias *%s makes the config more than %d values", n.Line, n.Value, MaxNodes)
		}
		return e, nil
	}
	if depth > MaxDepth {
		return extent{}, fmt.Errorf("line %d: nested more than %d deep", n.Line, MaxDepth)
	}
	if lc.nodes++; lc.nodes > MaxNodes {
		return extent{}, fmt.Errorf("line %d: more than %d values", n.Line, MaxNodes)
	}
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content)/2 > MaxEntries {
			return extent{}, fmt.Errorf("line %d: a section of %d keys, more than %d", n.Line, len(n.Content)/2, MaxEntries)
		}
		if err := uniqueKeys(n); err != nil {
			return extent{}, err
		}
	case yaml.SequenceNode:
		if len(n.Content) > MaxEntries {
			return extent{}, fmt.Errorf("line %d: a list of %d items, more than %d", n.Line, len(n.Content), MaxEntries)
		}
	}
	e := extent{size: 1}
	inner := depth + 1
	if n.Kind == yaml.DocumentNode {
		inner = depth // the document is not a level of nesting
	}
	for _, c := range n.Content {
		ce, err := lc.check(c, inner)
		if err != nil {
			return extent{}, err
		}
		e.size += ce.size
		e.height = max(e.height, ce.height+inner-depth)
	}
	if lc.done == nil {
		lc.done = make(map[*yaml.Node]extent)
	}
	if n.Anchor != "" {
		lc.done[n] = e
	}
	return e, nil
}

// uniqueKeys returns an error naming the first key of mapping n that
// repeats an earlier one. Keys compare as yaml.v3 compares them: by kind
// and value.
func uniqueKeys(n *yaml.Node) error {
	type key struct {
		kind  yaml.Kind
		value string
	}
	seen := make(map[key]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		// An alias as a key names its field only once resolved, so the
		// checks that go by key (numbers, duplicates) would not see it; no
		// config needs one.
		if k.Kind == yaml.AliasNode {
			return fmt.Errorf("line %d: an alias (*%s) cannot be a key", k.Line, k.Value)
		}
		if line, dup := seen[key{k.Kind, k.Value}]; dup {
			return fmt.Errorf("line %d: key %q already defined at line %d", k.Line, k.Value, line)
		}
		seen[key{k.Kind, k.Value}] = k.Line
	}
	return nil
}

// sizeWord writes a byte count in KiB or MiB when it is a whole number of
// them.
func sizeWord(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
