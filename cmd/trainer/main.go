// Command trainer trains, evaluates and exports probformer models.
//
//	trainer train --config maxnorm
//	trainer eval --checkpoint checkpoints/maxnorm-20261121-063000
//
// Bad input (an unknown config key, a missing file, a corrupt checkpoint,
// a run directory another trainer writes) exits with status 2 and a
// one-line error; a failure during a run exits with status 1; Ctrl-C or
// SIGTERM before a run starts training exits with status 130 or 143
// (once it trains, the run saves a checkpoint and exits with status 0).
//
// The commands live in package cli; a program with tasks of its own
// builds the same command line around them (see cli's documentation).
package main

import (
	"github.com/probformer/probformer/cmd/trainer/cli"
	_ "github.com/probformer/probformer/cmd/trainer/tasks" // the built-in tasks
)

func main() { cli.Main() }
