package configs

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// yaml.v3 fills an integer field from any number that fits its type once
// truncated: `batch: 64.5` decodes as 64 and `steps: 1.5` as 1, since it
// converts a !!float to the field's type. It leaves a field zero for an
// empty value (`batch:`), and takes NaN and ±Inf for a float field. So
// that no config, file or --set, means other than it says, every decode
// (decodeStrict) first walks the document beside the Go type it fills and
// holds each number field to its type: an integer field takes an integer
// in its type's range (64.0 and 1e3, being integers, too), a float field
// a finite number, and neither an empty value. The walk also records the
// line of every key, for messages about values (Check).

// numberError is a value that a number field refuses: the key's dotted
// path ("" for a --set value, which decodes alone), the line, the value
// as written, and what the field wants.
type numberError struct {
	line  int
	key   string
	value string // as written; "" when empty
	empty bool
	want  string
}

// Error words e as it is in a config file:
// `line 38: training.batch = 3.5: want an integer`.
func (e *numberError) Error() string {
	if e.empty {
		return fmt.Sprintf("line %d: %s is empty: want %s", e.line, e.key, e.want)
	}
	return fmt.Sprintf("line %d: %s = %s: want %s", e.line, e.key, e.value, e.want)
}

// setError words e as it is in a --set assignment:
// `--set training.batch=3.5: want an integer`.
func (e *numberError) setError(key, value string) error {
	if e.empty {
		return fmt.Errorf("--set %s=%s: empty, want %s", key, shorten(value), e.want)
	}
	return fmt.Errorf("--set %s=%s: want %s", key, shorten(value), e.want)
}

// numberChecker walks a document's nodes beside the Go type they decode
// into (checkNumbers).
type numberChecker struct {
	lines map[string]int // dotted key → line of the key
}

// checkNumbers checks every scalar of doc that fills a number field of a
// value of type t, as the package comment above says, and returns the
// line of each key it met by dotted path ("training.batch"), or the first
// value refused, a *numberError. Keys that t lacks and values of the wrong
// kind (a list for a number) are left to the strict decode.
func checkNumbers(doc *yaml.Node, t reflect.Type) (map[string]int, error) {
	nc := numberChecker{lines: map[string]int{}}
	if err := nc.walk(doc, t, "", doc.Line); err != nil {
		return nil, err
	}
	return nc.lines, nil
}

var (
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType        = reflect.TypeFor[time.Duration]()
)

// walk checks node n, which fills a value of type t at dotted path key;
// line is where the value is used (an alias's line, not its anchor's).
func (nc *numberChecker) walk(n *yaml.Node, t reflect.Type, key string, line int) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil // the type reads its own values
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return nc.walk(n.Content[0], t, key, n.Content[0].Line)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil
		}
		return nc.walk(n.Alias, t, key, line)
	case yaml.ScalarNode:
		return checkScalar(n, t, key, line)
	case yaml.MappingNode:
		return nc.mapping(n, t, key)
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		for i, item := range n.Content {
			if err := nc.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", key, i), item.Line); err != nil {
				return err
			}
		}
	}
	return nil
}

// mapping walks the values of mapping n, which fills a struct or a map of
// type t at key. Merged mappings (<<) come first: the mapping's own keys
// override theirs, in yaml.v3 as here.
func (nc *numberChecker) mapping(n *yaml.Node, t reflect.Type, key string) error {
	if t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
		return nil
	}
	prefix := key
	if prefix != "" {
		prefix += "."
	}
	for _, merges := range []bool{true, false} {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			merge := k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
			if merge != merges {
				continue
			}
			if merge {
				if err := nc.merge(v, t, key); err != nil {
					return err
				}
				continue
			}
			ft, ok := t, true
			if t.Kind() == reflect.Map {
				ft = t.Elem()
			} else {
				ft, ok = fieldType(t, k.Value)
			}
			if !ok {
				continue // an unknown key: the strict decode's error
			}
			nc.lines[prefix+k.Value] = k.Line
			if err := nc.walk(v, ft, prefix+k.Value, v.Line); err != nil {
				return err
			}
		}
	}
	return nil
}

// merge walks the value of a merge key: a mapping, an alias of one, or a
// list of them, merged into a value of type t at key.
func (nc *numberChecker) merge(v *yaml.Node, t reflect.Type, key string) error {
	if v.Kind == yaml.SequenceNode {
		for _, item := range v.Content {
			if err := nc.merge(item, t, key); err != nil {
				return err
			}
		}
		return nil
	}
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind != yaml.MappingNode {
		return nil
	}
	return nc.mapping(v, t, key)
}

// fieldType is the type of the field of struct t whose YAML key is key,
// looking into inline structs as yaml.v3 does.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		name, inline, ok := yamlKey(t.Field(i))
		switch {
		case !ok:
		case inline:
			if ft, found := fieldType(t.Field(i).Type, key); found {
				return ft, true
			}
		case name == key:
			return t.Field(i).Type, true
		}
	}
	return nil, false
}

// checkScalar checks scalar n for a field of type t at key, used at line.
func checkScalar(n *yaml.Node, t reflect.Type, key string, line int) error {
	var want string
	switch {
	case t == durationType:
		return nil
	case isInt(t.Kind()), isUint(t.Kind()):
		want = "an integer"
	case t.Kind() == reflect.Float32, t.Kind() == reflect.Float64:
		want = "a finite number"
	default:
		return nil
	}
	refuse := func(want string) error {
		return &numberError{line: line, key: key, value: n.Value, want: want}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil // the strict decode's error
	}
	if v == nil || v == "" {
		return &numberError{line: line, key: key, empty: true, want: want}
	}
	if s, ok := v.(string); ok {
		return &numberError{line: line, key: key, value: strconv.Quote(s), want: want}
	}
	if t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64 {
		f, ok := asFloat(v)
		switch {
		case !ok:
			return refuse(want)
		case math.IsNaN(f) || math.IsInf(f, 0):
			return refuse(want)
		case t.Kind() == reflect.Float32 && math.Abs(f) > math.MaxFloat32:
			return refuse(fmt.Sprintf("a finite number of magnitude at most %g (a float32's largest)", math.MaxFloat32))
		}
		return nil
	}
	lo, hi := intRange(t)
	inRange := "an integer in [" + lo + ", " + hi + "]"
	switch v := v.(type) {
	case int:
		if fitsInt(t, int64(v)) {
			return nil
		}
		return refuse(inRange)
	case int64:
		if fitsInt(t, v) {
			return nil
		}
		return refuse(inRange)
	case uint64:
		if fitsUint(t, v) {
			return nil
		}
		return refuse(inRange)
	case float64:
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v):
			return refuse(want)
		case !floatFits(t, v):
			return refuse(inRange)
		case math.Abs(v) >= 1<<53:
			// From 2⁵³ on a float's neighbours are 2 or more apart: the
			// written digits and the value read may differ.
			return refuse(inRange + " written in digits, without a decimal point or exponent")
		}
		return nil
	}
	return refuse(want) // a bool, a timestamp
}

func isInt(k reflect.Kind) bool {
	return k == reflect.Int || k == reflect.Int8 || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64
}

func isUint(k reflect.Kind) bool {
	return k == reflect.Uint || k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 || k == reflect.Uint64 || k == reflect.Uintptr
}

// intRange is the range of integer type t, in decimal.
func intRange(t reflect.Type) (lo, hi string) {
	bits := t.Bits()
	if isUint(t.Kind()) {
		return "0", strconv.FormatUint(math.MaxUint64>>(64-bits), 10)
	}
	return strconv.FormatInt(math.MinInt64>>(64-bits), 10), strconv.FormatInt(math.MaxInt64>>(64-bits), 10)
}

// fitsInt reports whether integer type t holds v.
func fitsInt(t reflect.Type, v int64) bool {
	if isUint(t.Kind()) {
		return v >= 0 && fitsUint(t, uint64(v))
	}
	bits := t.Bits()
	return v >= math.MinInt64>>(64-bits) && v <= math.MaxInt64>>(64-bits)
}

// fitsUint reports whether integer type t holds v.
func fitsUint(t reflect.Type, v uint64) bool {
	if isUint(t.Kind()) {
		return v <= math.MaxUint64>>(64-t.Bits())
	}
	return v <= math.MaxInt64>>(64-t.Bits())
}

// floatFits reports whether integer type t holds the whole number v.
func floatFits(t reflect.Type, v float64) bool {
	bits := t.Bits()
	if isUint(t.Kind()) {
		return v >= 0 && v < math.Ldexp(1, bits)
	}
	return v >= -math.Ldexp(1, bits-1) && v < math.Ldexp(1, bits-1)
}

// asFloat is a decoded YAML number as a float64.
func asFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}
