package configs

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed presets/*.yaml
var presets embed.FS

// DefaultPreset is the preset `trainer train` runs without --config.
const DefaultPreset = "maxnorm"

// Presets returns the names of the embedded presets.
func Presets() []string {
	entries, _ := fs.ReadDir(presets, "presets")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return names
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
// line, or the key.
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
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", source, err)
	}
	cfg.Name = name
	if source == nameOrPath {
		resolveDataPaths(cfg, filepath.Dir(nameOrPath))
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

// resolveDataPaths joins dir to the relative data paths of cfg.
func resolveDataPaths(cfg *Config, dir string) {
	for _, p := range []*string{&cfg.Data.TrainFile, &cfg.Data.ValidFile, &cfg.Data.TestFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// Parse decodes YAML strictly: unknown keys, wrong types, duplicate keys
// and trailing documents are errors naming the line, and so is a config
// beyond the limits MaxConfigBytes, MaxDepth, MaxEntries and MaxNodes.
func Parse(data []byte) (*Config, error) {
	var cfg Config
	if err := decodeStrict(data, &cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// readConfigFile reads a config file of at most MaxConfigBytes; a longer
// one is an error naming the file, and only MaxConfigBytes+1 bytes of it
// are read.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%s: more than the %s a config may have", path, sizeWord(MaxConfigBytes))
	}
	return data, nil
}

var (
	unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type configs\.(\w+)`)
	wrongType    = regexp.MustCompile("line (\\d+): cannot unmarshal !!(\\w+) `([^`]*)` into (\\S+)")
)

// cleanYAMLError turns yaml.v3's messages into one line in the schema's
// own words: `line 7: unknown key "lrate" in optimizer`.
func cleanYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, 0, maxMessages+1)
	for _, e := range te.Errors[:min(len(te.Errors), maxMessages)] {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			msgs = append(msgs, fmt.Sprintf("line %s: unknown key %q in %s", m[1], m[2], sectionName(m[3])))
		} else if m := wrongType.FindStringSubmatch(e); m != nil {
			msgs = append(msgs, fmt.Sprintf("line %s: %q is a %s, want %s", m[1], m[3], yamlKind(m[2]), typeWord(m[4])))
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

func sectionName(goType string) string {
	if goType == "Config" {
		return "the top level"
	}
	return strings.ToLower(goType)
}

func typeWord(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return "a " + strings.TrimPrefix(goType, "configs.") + " section"
}

// Set applies one override "a.b.c=value" with the value in YAML syntax.
func (c *Config) Set(assignment string) error {
	key, value, ok := strings.Cut(assignment, "=")
	if !ok || key == "" {
		return fmt.Errorf("--set %q: want key=value, e.g. training.steps=100", assignment)
	}
	field, err := c.field(key)
	if err != nil {
		return fmt.Errorf("--set %s: %w", key, err)
	}
	ptr := reflect.New(field.Type())
	if err := decodeStrict([]byte(value), ptr.Interface()); err != nil || value == "" {
		return fmt.Errorf("--set %s=%s: want %s", key, shorten(value), typeWord(field.Type().String()))
	}
	field.Set(ptr.Elem())
	return nil
}

// shorten quotes at most the first 40 bytes of a --set value in an error.
func shorten(value string) string {
	const most = 40
	if len(value) <= most {
		return value
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(value[:most], ""), len(value))
}

// Get returns the value at a dotted key, for messages and checks.
func (c *Config) Get(key string) (any, error) {
	f, err := c.field(key)
	if err != nil {
		return nil, err
	}
	return f.Interface(), nil
}

// field finds the struct field at a dotted path of YAML keys.
func (c *Config) field(key string) (reflect.Value, error) {
	v := reflect.ValueOf(c).Elem()
	parts := strings.Split(key, ".")
	for i, part := range parts {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, fmt.Errorf("%s is not a section", strings.Join(parts[:i], "."))
		}
		found := false
		for j := range v.NumField() {
			if tag := v.Type().Field(j).Tag.Get("yaml"); tag == part && tag != "-" {
				v, found = v.Field(j), true
				break
			}
		}
		if !found {
			where := "the top level"
			if i > 0 {
				where = strings.Join(parts[:i], ".")
			}
			return reflect.Value{}, fmt.Errorf("unknown key %q in %s", part, where)
		}
	}
	if v.Kind() == reflect.Struct {
		return reflect.Value{}, fmt.Errorf("%s is a section; set one of its keys", key)
	}
	return v, nil
}

// YAML returns the config as YAML, as stored in checkpoints.
func (c *Config) YAML() []byte {
	out, err := yaml.Marshal(c)
	if err != nil {
		// Marshal of plain structs of scalars cannot fail.
		panic(err)
	}
	return out
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
