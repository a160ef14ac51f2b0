// Package train is probformer's training library: the pieces that
// `trainer train` is made of, usable from any Go program.
//
// A Task (task.go) is data, a model graph, its loss and its evaluation.
// A Loop (loop.go) trains a Task: learning-rate schedules (schedule.go),
// a weight average (ema.go), checkpoints and exact resume in a run
// directory (rundir.go), metrics.jsonl, a progress display (progress.go),
// evaluation at a cadence with the best checkpoint kept, a clean stop on
// Ctrl-C or SIGTERM (signals.go) and a stop with an error on a NaN or
// infinite loss or gradient (step.go). Objective (objective.go) adds the
// penalties a model's layers record, by their graph.PenaltyKind, to a
// task's loss: the ELBO of Bayesian attention and the head-diversity
// regulariser. Each piece works on its own.
//
// The registry (registry.go) maps a config's task name to its Spec: the
// types of the task's own data: and model: config sections, their rules
// and its constructor, given by one Register call. configs.Load then reads
// a config of the task strictly into those types, Validate checks them by
// the Spec's rules, and NewTask builds the task from them. The built-in
// tasks (github.com/probformer/probformer/cmd/trainer/tasks) register
// themselves through it exactly as a user's task does (ExampleRegister).
//
// Data-parallel training (parallel.go): with Settings.Comm a Loop is one
// process of several, each training on its share of every global batch,
// with the gradients summed by one allreduce per step; package mpi
// provides the Comm of an Open MPI job (build tag mpi).
//
// A Loop is reproducible: the same Task, Settings and seed give
// bit-identical metrics and checkpoints, and a run stopped and resumed
// ends exactly where an uninterrupted one does.
package train
