package configs

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

//go:embed presets/*.yaml
var presets embed.FS

// DefaultPreset is the preset `trainer train` runs without --config.
const DefaultPreset = "maxnorm"

// Presets returns the names of the embedded presets, in alphabetical
// order.
func Presets() []string {
	entries, _ := fs.ReadDir(presets, "presets")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names) // maxnorm before maxnorm-bayes, whose file sorts first
	return names
}

// presetDescriptions are the presets' one-line descriptions (as the
// README's table of presets has them), for `trainer presets`. A preset
// file holds only the config, so that it parses as strictly as a user's.
var presetDescriptions = map[string]string{
	"bert-pairs-tsv":      "BERT pair classifier on a tab-separated parallel corpus: is S′ the translation of S?",
	"bert-pretrain-tsv":   "BERT masked-LM pretraining on true pairs of a TSV parallel corpus, no pair label",
	"bert-toy":            "BERT pretraining (masked LM + next-sentence prediction) on pairs of two-sentence toy stories",
	"maxnorm":             "Set Transformer picking the largest L2 norm among 50 offset points in the plane (the default)",
	"maxnorm-bayes":       "The maxnorm Set Transformer with Bayesian (Weibull) attention, trained on the ELBO",
	"maxnorm-em":          "The maxnorm Set Transformer with EM attention, one key-adaptation iteration",
	"maxregression-paper": "Set Transformer regressing the maximum of 1–10 scalars, as in its paper (§5.1)",
	"mlm-toy":             "Masked-LM pretraining of the seq2seq-toy encoder on the toy language's source side",
	"segment-em":          "Interactive segmentation of 16×16 images from a few clicks, with EM attention",
	"seq2seq-toy":         "Transformer translating the built-in toy language (SVO → SOV); needs no files",
	"seq2seq-toy-bayes":   "The seq2seq-toy Transformer with Bayesian (Weibull) attention, trained on the ELBO",
	"seq2seq-tsv":         "Transformer as in PyTorch's nn.Transformer on a tab-separated parallel corpus",
}

// PresetDescription returns the one-line description of the named preset,
// or "" for a name that is not a preset.
func PresetDescription(name string) string {
	return presetDescriptions[name]
}

// PresetYAML returns the text of the named preset.
func PresetYAML(name string) ([]byte, error) {
	data, err := presets.ReadFile("presets/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no preset %q (presets: %s)", name, strings.Join(Presets(), ", "))
	}
	return data, nil
}

// Load reads a config from a preset name or a YAML file, applies the
// key=value overrides in sets, and validates it. Errors name the file and
// line, or the key. The config's task must be registered: the presets'
// tasks are once github.com/probformer/probformer/cmd/trainer/tasks is
// imported.
//
// A value that a rule refuses names where it came from, when it is not
// the preset's: its line in the file, or --set (FieldError).
//
// A relative data path in a config file (data.train_file, valid_file,
// test_file) is relative to the file's directory, wherever trainer runs;
// Load joins the two. A path in sets, given on the command line, stays
// relative to the working directory, as is a preset's (presets name no
// file).
func Load(nameOrPath string, sets []string) (*Config, error) {
	var (
		data   []byte
		source string
		name   string
	)
	if slices.Contains(Presets(), nameOrPath) {
		data, _ = PresetYAML(nameOrPath)
		source, name = "preset "+nameOrPath, nameOrPath
	} else {
		var err error
		data, err = readConfigFile(nameOrPath)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(nameOrPath, "/.") {
				return nil, fmt.Errorf("config %s: no such preset or file (presets: %s)", nameOrPath, strings.Join(Presets(), ", "))
			}
			return nil, fmt.Errorf("config: %w", err)
		}
		source = nameOrPath
		name = strings.TrimSuffix(filepath.Base(nameOrPath), filepath.Ext(nameOrPath))
	}
	cfg, lines, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", source, err)
	}
	cfg.Name = name
	if source == nameOrPath {
		resolveDataPaths(cfg, filepath.Dir(nameOrPath))
		cfg.where = lines
	}
	for _, s := range sets {
		if err := cfg.Set(s); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", source, err)
	}
	return cfg, nil
}

// resolveDataPaths joins dir to the relative file paths of cfg (Paths).
func resolveDataPaths(cfg *Config, dir string) {
	for _, p := range cfg.Paths() {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// Parse decodes YAML strictly: unknown keys, wrong types, duplicate keys
// and trailing documents are errors naming the line, and so is a config
// beyond the limits MaxConfigBytes, MaxDepth, MaxEntries and MaxNodes.
// The data and model sections decode into the types of the task the
// config names (RegisterTask); under a task that is not registered, into
// maps, which Validate then refuses. Parse does not validate values.
func Parse(data []byte) (*Config, error) {
	cfg, _, err := parse(data)
	return cfg, err
}

// parse is Parse, and returns the line of every key by dotted path too.
func parse(data []byte) (*Config, map[string]int, error) {
	var out reflect.Value
	lines, err := decodeStrict(data, func(doc *yaml.Node) (any, map[string]string) {
		// The task, read loosely first: merge keys and aliases may set it.
		var head struct {
			Task string `yaml:"task"`
		}
		_ = doc.Decode(&head) // a bad task is the strict decode's error
		t, names := configType, configNames
		if s, ok := lookupSection(head.Task); ok {
			t, names = s.doc, s.names
		}
		out = reflect.New(t)
		return out.Interface(), names
	})
	if err != nil {
		return nil, nil, err
	}
	return fromDocument(out.Elem()), lines, nil
}

// readConfigFile reads a config file of at most MaxConfigBytes; a longer
// one is an error naming the file, and only MaxConfigBytes+1 bytes of it
// are read.
func readConfigFile(path string) ([]byte, error) {
	// Only a regular file (a symbolic link to one is followed): stat
	// first, so that a device is not even opened, and a non-blocking open,
	// so that a named pipe put there in between, whose writer may never
	// come, is refused by the second stat instead of waited on. This is
	// graph/fileio's OpenRegular again: configs imports no package of the
	// project but layers (TestImportsPointOneWay).
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info.Mode())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%s: more than the %s a config may have", path, sizeWord(MaxConfigBytes))
	}
	return data, nil
}

// notRegular is the error for a config path that is not a regular file.
func notRegular(path string, m fs.FileMode) error {
	kind := "a special file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	}
	return fmt.Errorf("%s: not a regular file but %s; a config is a YAML file", path, kind)
}

var (
	unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type (.+)$`)
	wrongType    = regexp.MustCompile("line (\\d+): cannot unmarshal !!(\\w+) `([^`]*)` into (.+)$")
)

// cleanYAMLError turns yaml.v3's messages into one line in the schema's
// own words: `line 7: unknown key "lrate" in optimizer`. names maps the
// Go types of the sections to their keys (sectionNames).
func cleanYAMLError(err error, names map[string]string) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, 0, maxMessages+1)
	for _, e := range te.Errors[:min(len(te.Errors), maxMessages)] {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			msgs = append(msgs, fmt.Sprintf("line %s: unknown key %q in %s", m[1], m[2], sectionName(m[3], names)))
		} else if m := wrongType.FindStringSubmatch(e); m != nil {
			msgs = append(msgs, fmt.Sprintf("line %s: %q is a %s, want %s", m[1], m[3], yamlKind(m[2]), typeWord(m[4], names)))
		} else {
			msgs = append(msgs, e)
		}
	}
	if more := len(te.Errors) - maxMessages; more > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more", more))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// maxMessages is the most of yaml.v3's messages an error quotes.
const maxMessages = 5

// sectionName is the key of the section of Go type goType, or failing
// that the type's name in lower case.
func sectionName(goType string, names map[string]string) string {
	if name, ok := names[goType]; ok {
		return name
	}
	return strings.ToLower(goType[strings.LastIndex(goType, ".")+1:])
}

// typeWord says what a value of Go type goType is, for an error.
func typeWord(goType string, names map[string]string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	if name, ok := names[goType]; ok && name != "the top level" {
		return "a section (" + name + ")"
	}
	return "a section"
}

// Set applies one override "a.b.c=value" with the value in YAML syntax.
// A number is held to its field's type as in a file: an integer field
// takes an integer in its type's range, a float field a finite number,
// and neither an empty value. Setting task decodes the data and model
// sections again, into the new task's types.
func (c *Config) Set(assignment string) error {
	key, value, ok := strings.Cut(assignment, "=")
	if !ok || key == "" {
		return fmt.Errorf("--set %s: want key=value, e.g. training.steps=100", shorten(assignment))
	}
	if len(key) > maxKeyBytes || !utf8.ValidString(key) || strings.ContainsFunc(key, unprintable) {
		return fmt.Errorf("--set %s: not a key; keys are dotted names such as training.steps", shorten(key))
	}
	if !utf8.ValidString(value) {
		return fmt.Errorf("--set %s=%s: not valid UTF-8", key, shorten(value))
	}
	field, err := c.field(key)
	if err != nil {
		return fmt.Errorf("--set %s: %w", key, err)
	}
	ptr := reflect.New(field.Type())
	err = decodeValue([]byte(value), ptr.Interface())
	var ne *numberError
	switch {
	case errors.As(err, &ne):
		return ne.setError(key, value)
	case errors.Is(err, errEmpty):
		return fmt.Errorf("--set %s=%s: empty, want %s", key, shorten(value), typeWord(field.Type().String(), nil))
	case err != nil:
		return fmt.Errorf("--set %s=%s: want %s", key, shorten(value), typeWord(field.Type().String(), nil))
	}
	field.Set(ptr.Elem())
	where := maps.Clone(c.where) // shared with c's clones
	if where == nil {
		where = map[string]int{}
	}
	where[key] = fromSet
	c.where = where
	if key == "task" {
		if err := c.retype(); err != nil {
			return fmt.Errorf("--set %s: %w", assignment, err)
		}
	}
	return nil
}

// retype decodes the data and model sections again into the types of
// c.Task's registration (or into maps, for a task that is not
// registered), strictly: a key the new task lacks is an error.
func (c *Config) retype() error {
	s, ok := lookupSection(c.Task)
	for _, f := range []struct {
		name string
		v    *any
		t    reflect.Type
	}{{"data", &c.Data, nil}, {"model", &c.Model, nil}} {
		if ok {
			f.t = s.data
			if f.name == "model" {
				f.t = s.model
			}
		}
		if f.t != nil && reflect.TypeOf(*f.v) == reflect.PointerTo(f.t) {
			continue
		}
		text, err := yaml.Marshal(*f.v)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		var out reflect.Value
		if f.t != nil {
			out = reflect.New(f.t)
		} else {
			out = reflect.New(reflect.TypeFor[map[string]any]())
		}
		names := map[string]string{out.Type().Elem().String(): f.name}
		if _, err := decodeStrict(text, func(*yaml.Node) (any, map[string]string) { return out.Interface(), names }); err != nil && !errors.Is(err, errEmpty) {
			return fmt.Errorf("the %s section does not fit task %s: %w", f.name, c.Task, err)
		}
		if f.t != nil {
			*f.v = out.Interface()
		} else {
			*f.v = out.Elem().Interface()
		}
	}
	return nil
}

// shorten quotes at most the first 40 bytes of a --set value in an error.
func shorten(value string) string {
	const most = 40
	s := value
	if len(s) > most {
		s = s[:most]
	}
	// a terminal is not to be sent raw bytes or escape sequences
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unprintable) {
		q := strconv.Quote(s)
		s = q[1 : len(q)-1]
	}
	if len(value) > most {
		s = fmt.Sprintf("%s… (%d bytes)", s, len(value))
	}
	return s
}

// unprintable reports a rune that a message must not print as it is (a
// control character: an escape sequence would reach the terminal).
func unprintable(r rune) bool { return !unicode.IsPrint(r) }

// maxKeyBytes bounds a --set key: the longest dotted path of the schema
// is a few dozen bytes.
const maxKeyBytes = 128

// Get returns the value at a dotted key, for messages and checks.
func (c *Config) Get(key string) (any, error) {
	f, err := c.field(key)
	if err != nil {
		return nil, err
	}
	return f.Interface(), nil
}

// field finds the field at a dotted path of YAML keys, through the task's
// sections and their inline structs.
func (c *Config) field(key string) (reflect.Value, error) {
	v := reflect.ValueOf(c).Elem()
	parts := strings.Split(key, ".")
	for i, part := range parts {
		v = deref(v)
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, fmt.Errorf("%s is not a section", strings.Join(parts[:i], "."))
		}
		f, found := yamlField(v, part)
		if !found {
			where := "the top level"
			if i > 0 {
				where = strings.Join(parts[:i], ".")
			}
			return reflect.Value{}, fmt.Errorf("unknown key %q in %s", part, where)
		}
		v = f
	}
	if deref(v).Kind() == reflect.Struct {
		return reflect.Value{}, fmt.Errorf("%s is a section; set one of its keys", key)
	}
	return v, nil
}

// deref follows interfaces and pointers to the value they hold.
func deref(v reflect.Value) reflect.Value {
	for (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	return v
}

// yamlField returns the field of struct v whose YAML key is key, looking
// into inline structs as yaml.v3 does.
func yamlField(v reflect.Value, key string) (reflect.Value, bool) {
	for i := range v.NumField() {
		name, inline, ok := yamlKey(v.Type().Field(i))
		switch {
		case !ok:
		case inline:
			if f, found := yamlField(v.Field(i), key); found {
				return f, true
			}
		case name == key:
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// Paths returns the file paths among the task's sections by dotted key
// ("data.train_file"): the string fields tagged `config:"path"`. Load
// joins a relative one to the directory of the config file that holds it;
// through the pointers a caller rewrites them (trainer stores them with no
// absolute path of its machine).
func (c *Config) Paths() map[string]*string {
	out := map[string]*string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		v = deref(v)
		if v.Kind() != reflect.Struct {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, inline, ok := yamlKey(f)
			switch {
			case !ok:
			case inline:
				walk(v.Field(i), prefix)
			case f.Tag.Get("config") == "path" && f.Type.Kind() == reflect.String && v.Field(i).CanAddr():
				out[prefix+name] = v.Field(i).Addr().Interface().(*string)
			default:
				walk(v.Field(i), prefix+name+".")
			}
		}
	}
	walk(reflect.ValueOf(c.Data), "data.")
	walk(reflect.ValueOf(c.Model), "model.")
	return out
}

// Clone returns a copy of c whose task sections are copies too, so that
// changing the copy's fields leaves c as it was (slices and maps inside
// a section are shared).
func (c *Config) Clone() *Config {
	out := *c
	out.Data, out.Model = cloneSection(c.Data), cloneSection(c.Model)
	return &out
}

func cloneSection(s any) any {
	v := reflect.ValueOf(s)
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct:
		p := reflect.New(v.Elem().Type())
		p.Elem().Set(v.Elem())
		return p.Interface()
	case v.Kind() == reflect.Map && !v.IsNil():
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			m.SetMapIndex(it.Key(), it.Value())
		}
		return m.Interface()
	}
	return s
}

// YAML returns the config as YAML, as stored in checkpoints and a run's
// config.yaml: every key of the shared sections and of the task's own,
// but no retired key (config:"retired", see RegisterTask) that is zero.
// Parse reads it back to the same config.
func (c *Config) YAML() []byte {
	var doc yaml.Node
	err := doc.Encode(c)
	if err == nil {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			switch doc.Content[i].Value {
			case "data":
				dropRetired(doc.Content[i+1], reflect.ValueOf(c.Data))
			case "model":
				dropRetired(doc.Content[i+1], reflect.ValueOf(c.Model))
			}
		}
		var out []byte
		if out, err = yaml.Marshal(&doc); err == nil {
			return out
		}
	}
	// Marshal of structs of scalars cannot fail, and RegisterTask checked
	// that yaml.v3 writes the task's section types.
	panic(err)
}

// dropRetired removes from mapping n, which yaml.v3 wrote from section
// v, the keys of v's retired fields that are zero.
func dropRetired(n *yaml.Node, v reflect.Value) {
	drop := map[string]bool{}
	retiredZeros(deref(v), false, drop)
	if n.Kind != yaml.MappingNode || len(drop) == 0 {
		return
	}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !drop[n.Content[i].Value] {
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
	}
	n.Content = kept
}

// retiredZeros adds to drop the keys of struct v's fields that are zero
// and retired: inside an inline struct tagged config:"retired", or, if
// retired, anywhere in v.
func retiredZeros(v reflect.Value, retired bool, drop map[string]bool) {
	if v.Kind() != reflect.Struct {
		return
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		key, inline, ok := yamlKey(f)
		switch {
		case !ok:
		case inline:
			retiredZeros(v.Field(i), retired || f.Tag.Get("config") == "retired", drop)
		case retired && v.Field(i).IsZero():
			drop[key] = true
		}
	}
}

func yamlKind(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "map":
		return "section"
	case "seq":
		return "list"
	}
	return tag
}

// JSON returns the config as JSON with the YAML key names, for metadata
// that other tools read (a safetensors header, say).
func (c *Config) JSON() ([]byte, error) {
	var tree map[string]any
	if err := yaml.Unmarshal(c.YAML(), &tree); err != nil {
		return nil, err
	}
	return json.Marshal(tree)
}
