package configs

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// section is a registered task's part of the schema: the struct types of
// its data and model sections, the document type that decodes a whole
// config of the task, and its rules.
type section struct {
	data, model reflect.Type
	doc         reflect.Type      // Config with Data and Model of the task's types
	names       map[string]string // Go type → section key, for decoding errors
	validate    func(c *Config) error
}

// sections maps task names to their sections, in registration order.
var sections = struct {
	sync.RWMutex
	names  []string
	byName map[string]*section
}{byName: map[string]*section{}}

// RegisterTask makes name a task that Parse, Load and Validate know. D and
// M are the struct types of its data: and model: sections: their fields,
// by their yaml tags (or lower-cased names), are the sections' keys, and
// decoding is as strict as for the shared sections: an unknown key or a
// value of the wrong type is an error naming the line and the key, and an
// integer field takes only an integer in its type's range, a float field
// only a finite number. A
// string field tagged `config:"path"` is a file path, which Load resolves
// against the config file's directory (see Paths). An inline struct field
// tagged `config:"retired"` holds keys that old configs have and the task
// no longer reads: they still decode, so those configs read, but
// Config.YAML writes one only if it is not zero (which the task's validate
// should refuse). A task with no model settings passes struct{} for M.
//
// validate checks the task's sections, and any shared field the task
// gives a meaning (training.loss, say), after the shared sections passed
// theirs; it returns the first bad field, as Check does. nil accepts every
// value.
//
// train.Register calls RegisterTask for a task it registers with its
// constructor, and a program that trains calls only that; RegisterTask
// alone suits a program that reads and checks configs without training.
// It is an error to register a name twice or types that are not structs.
func RegisterTask[D, M any](name string, validate func(c *Config, data *D, model *M) error) error {
	if name == "" {
		return fmt.Errorf("configs: register task %q: want a name", name)
	}
	dt, mt := reflect.TypeFor[D](), reflect.TypeFor[M]()
	for _, t := range []reflect.Type{dt, mt} {
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("configs: register task %q: section type %s is not a struct", name, t)
		}
		if err := marshals(t); err != nil {
			return fmt.Errorf("configs: register task %q: section type %s: %v", name, t, err)
		}
	}
	s := &section{data: dt, model: mt, doc: documentType(dt, mt)}
	s.names = sectionNames(s.doc)
	s.validate = func(c *Config) error {
		d, ok := c.Data.(*D)
		if !ok || d == nil {
			return fmt.Errorf("data: a section of type %T; task %s has %s", c.Data, name, dt)
		}
		m, ok := c.Model.(*M)
		if !ok || m == nil {
			return fmt.Errorf("model: a section of type %T; task %s has %s", c.Model, name, mt)
		}
		if validate == nil {
			return nil
		}
		return validate(c, d, m)
	}
	sections.Lock()
	defer sections.Unlock()
	if _, dup := sections.byName[name]; dup {
		return fmt.Errorf("configs: task %q is registered twice", name)
	}
	sections.byName[name] = s
	sections.names = append(sections.names, name)
	return nil
}

// marshals reports whether yaml.v3 takes t: it refuses bad tags (an
// unknown option, a key twice) and fields it cannot write (a func) by a
// panic, when it first meets the type; better at registration than in a
// user's run.
func marshals(t reflect.Type) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	_, err = yaml.Marshal(reflect.New(t).Interface())
	return err
}

// Tasks lists the registered task names in the order they were
// registered.
func Tasks() []string {
	sections.RLock()
	defer sections.RUnlock()
	return append([]string(nil), sections.names...)
}

func lookupSection(name string) (*section, bool) {
	sections.RLock()
	defer sections.RUnlock()
	s, ok := sections.byName[name]
	return s, ok
}

// configType is Config's type; a config of a task that is not registered
// decodes into it, its sections into maps.
var configType = reflect.TypeFor[Config]()

// configNames are the section keys of Config's own types.
var configNames = sectionNames(configType)

// documentType is Config with the types of Data and Model replaced by a
// task's section types, so that one strict decode of a config file fills
// them and reports errors with the file's line numbers.
// Config's unexported fields are left out.
func documentType(data, model reflect.Type) reflect.Type {
	var fields []reflect.StructField
	for i := range configType.NumField() {
		f := configType.Field(i)
		if !f.IsExported() {
			continue
		}
		switch f.Name {
		case "Data":
			f.Type = data
		case "Model":
			f.Type = model
		}
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}

// fromDocument copies a decoded document (of documentType, or a Config)
// into a Config, the task's sections as pointers.
func fromDocument(doc reflect.Value) *Config {
	var cfg Config
	out := reflect.ValueOf(&cfg).Elem()
	for i := range doc.NumField() {
		f, name := doc.Field(i), doc.Type().Field(i).Name
		if !doc.Type().Field(i).IsExported() {
			continue
		}
		switch {
		case (name == "Data" || name == "Model") && f.Kind() == reflect.Struct:
			p := reflect.New(f.Type())
			p.Elem().Set(f)
			out.FieldByName(name).Set(p)
		default:
			out.FieldByName(name).Set(f)
		}
	}
	return &cfg
}

// sectionNames maps the Go type of every section of a document type to
// its dotted key ("data", "model.attention"), the document itself to
// "the top level", so that yaml.v3's messages can name sections as a
// config has them. A type used at two places is named by both.
func sectionNames(doc reflect.Type) map[string]string {
	names := map[string]string{doc.String(): "the top level"}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			key, inline, ok := yamlKey(t.Field(i))
			ft := t.Field(i).Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case !ok || ft.Kind() != reflect.Struct:
			case inline:
				walk(ft, prefix)
			default:
				path := prefix + key
				if old, seen := names[ft.String()]; seen && old != path {
					path = old + " or " + path
				}
				names[ft.String()] = path
				walk(ft, path+".")
			}
		}
	}
	walk(doc, "")
	return names
}

// yamlKey returns the key of a struct field as yaml.v3 reads it: its tag's
// name, else its name in lower case; inline if it is a struct whose keys
// are its parent's (tag ",inline"); not ok if yaml.v3 skips it.
func yamlKey(f reflect.StructField) (key string, inline, ok bool) {
	if f.PkgPath != "" && !f.Anonymous {
		return "", false, false
	}
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return "", false, false
	}
	key, opts, _ := strings.Cut(tag, ",")
	for _, o := range strings.Split(opts, ",") {
		if o == "inline" {
			t := f.Type
			return "", true, t.Kind() == reflect.Struct
		}
	}
	if f.PkgPath != "" { // an unexported embedded type that is not inline
		return "", false, false
	}
	if key == "" {
		key = strings.ToLower(f.Name)
	}
	return key, false, true
}

// Rule is one check of a config field: OK, or the field at the dotted
// key Field should be Want.
type Rule struct {
	OK    bool
	Field string
	Want  string
}

// Check returns the error of the first rule that fails, a *FieldError
// naming its field, the field's value and what it should be
// ("training.steps = 0: want a positive integer"), and where the value
// came from if Load or Set knows it, or nil.
func (c *Config) Check(rules ...Rule) error {
	for _, r := range rules {
		if !r.OK {
			v, _ := c.Get(r.Field)
			e := &FieldError{Field: r.Field, Value: show(v), Want: r.Want}
			switch line := c.where[r.Field]; {
			case line == fromSet:
				e.Set = true
			case line > 0:
				e.Line = line
			}
			return e
		}
	}
	return nil
}

// FieldError is a config value that a rule refuses (Check).
type FieldError struct {
	// Field is the dotted key, Value the value as the message shows it,
	// Want what it should be.
	Field, Value, Want string
	// Line is the line of the key in the config file that Load read, 0
	// if unknown (a preset's, a default's, a checkpoint's config); Set
	// is whether the value came from Config.Set (--set).
	Line int
	Set  bool
}

// Error words e on one line: `line 38: training.steps = 0: want a
// positive integer`, `training.steps = -3 (--set): want a positive
// integer`.
func (e *FieldError) Error() string {
	switch {
	case e.Set:
		return fmt.Sprintf("%s = %s (--set): want %s", e.Field, e.Value, e.Want)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s = %s: want %s", e.Line, e.Field, e.Value, e.Want)
	}
	return fmt.Sprintf("%s = %s: want %s", e.Field, e.Value, e.Want)
}

// orList joins options as "a, b or c".
func orList(options []string) string {
	if len(options) < 2 {
		return strings.Join(options, "")
	}
	return strings.Join(options[:len(options)-1], ", ") + " or " + options[len(options)-1]
}
