// Package cli is the trainer's command line — train, eval, export,
// inspect, translate, attention, bleu, curves, sweep, presets and board —
// as a package, so that a program with tasks of its own gets the same
// commands for them. The trainer binary (cmd/trainer) is
//
//	func main() { cli.Main() }
//
// with the built-in tasks imported. A program of yours registers its task
// with train.Register (its config's task: name, with its own data: and
// model: sections) and calls Main:
//
//	package main
//
//	import (
//		"github.com/probformer/probformer/cmd/trainer/cli"
//		"github.com/probformer/probformer/cmd/trainer/train"
//	)
//
//	func init() {
//		// setSumData and setSumModel are the task's data: and model:
//		// sections; New builds the train.Task from them.
//		if err := train.Register("setsum", train.Spec[setSumData, setSumModel]{Check: check, New: newSetSum}); err != nil {
//			panic(err)
//		}
//	}
//
//	func main() { cli.Main() }
//
// Built with go build -o setsum, it runs every command on the task:
//
//	setsum train --config setsum.yaml --out runs/a --set data.elements=6
//	setsum eval --checkpoint runs/a
//	setsum export --checkpoint runs/a --format safetensors --out a.safetensors
//	setsum inspect runs/a
//
// --set reaches the task's own keys, and refuses a key its sections do
// not have (exit status 2). eval prints the task's report when the task
// is a train.Reporter, and otherwise its Evaluate metrics on the "test"
// split, written to eval_results.json as for the built-in tasks. The
// commands that only make sense for a built-in model (translate and
// attention for seq2seq, export --format pytorch, init.encoder_from) say
// so for another task. The built-in tasks (package tasks) are linked into
// every program that uses cli, since those commands read their types, so
// the presets (presets command) train in it too; --config defaults to
// the maxnorm preset, so name the task's config file.
//
// A checkpoint carries the config the commands rebuild its task from: a
// program that trains with the library loop itself (train.New) must set
// train.Settings.Config to the config's YAML, as train.SettingsFromConfig
// does, for eval and export to read its checkpoints.
//
// Main exits with status 0, 1 for a failure during a run, 2 for bad input
// and 128+N for a run stopped by signal N before it trained; started by
// mpirun for train, the process joins the MPI job (a binary built with
// -tags mpi). Run executes a command line in-process and returns that
// status, for tests; NewRootCommand and MainCommand let a program add
// commands of its own to the tree.
package cli
