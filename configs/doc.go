// Package configs defines the schema of a probformer run and loads it from
// an embedded preset or a YAML file. Decoding is strict: an unknown key or
// a value of the wrong type is an error that names the file, line and key.
// A config file is the whole experiment: task, data, model, optimizer,
// training schedule, seed and dtype.
package configs
