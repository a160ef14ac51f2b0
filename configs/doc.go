// Package configs defines the schema of a probformer run and loads it from
// an embedded preset or a YAML file. Decoding is strict: an unknown key or
// a value of the wrong type is an error that names the file, line and key.
// Numbers are held to their fields' types, in a file as in a --set value:
// an integer field takes an integer in its type's range (not 64.5, 1e20
// or an empty value), a float field a finite number. A value that a rule
// of Validate refuses is named with its line in the file, or as --set's.
// A config file is the whole experiment: task, data, model, optimizer,
// training schedule, seed and dtype.
//
// The optimizer, training and init sections, seed and dtype are shared by
// every task and defined here. The data and model sections belong to the
// task: their Go types are the task's own, registered with its name
// (RegisterTask, which the training library's train.Register calls), so a
// new task adds its keys without editing this package. Check and Rule
// word a task's checks as the shared ones are ("data.dim = 0: want a
// positive integer"), CheckAttention applies layers' attention rules.
//
// The work a config may ask of the decoder is bounded before it is
// decoded: at most MaxConfigBytes, MaxDepth levels of nesting, MaxEntries
// keys a section or items a list, and MaxNodes values with aliases
// expanded; a duplicate key is an error. A --set value is held to the
// same limits.
package configs
