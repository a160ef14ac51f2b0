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
//
// # Writing a task
//
// Task.Feed draws its batch from a *rand.Rand of math/rand/v2 (the run's
// data stream) and learns the batch's size from the program it feeds,
// prog.InputShape(name)[0], not from its config: under data parallelism
// and gradient accumulation the program keeps a shard of the batch but
// reports, and is fed, the whole step's. A layer whose attention config
// leaves the kind empty uses softmax attention (package layers). The
// evaluation program has a fixed batch, Task.EvalBatch; Evaluate scores
// a split of any size with RunEvalBatches, which cuts it into batches,
// pads the last one and says which rows are real (EvalBatch.Gather,
// Mask, Keep), and Means, which averages per-batch means weighed by
// their real counts: no task pads by hand.
//
// # Resuming
//
// Loop.Resume restores the newest loadable step checkpoint of the run
// directory, and fails with ErrNoCheckpoint (errors.Is) when there is
// none or no directory; Loop.ResumeOrStart resumes when it can and
// starts a new run otherwise, reporting which. The trainer's commands
// (`trainer eval`, export, translate, inspect, train --resume) read a
// run's config from its checkpoints: a library run must set
// Settings.Config to its config's YAML (configs.Config.YAML;
// SettingsFromConfig does), or they refuse its checkpoints with an
// error saying so.
//
// # Early stopping
//
// Settings.EarlyStop (training.early_stop: {patience: 5, min_delta: 0} in
// a config; a patience of 0 or no key is off) ends a run whose selection
// metric (Task.Selection, in its direction) has not beaten its reference
// by more than MinDelta for Patience validations in a row. best.ckpt
// keeps the best validation's weights, as always; the stop writes a step
// checkpoint, a metrics.jsonl line
//
//	{"step":N,"early_stop":true,"metric":"valid_mse","best":B,"best_step":M,"patience":P,"min_delta":D}
//
// a line on the progress display (EarlyStopper) and a closing line on
// Settings.Out. The count lives in the checkpoint's loop state: resuming
// a stopped run with the same patience is an ErrStoppedEarly whose
// message says what to set; with a larger patience, or none, it trains
// on. See EarlyStop.
//
// # Gradient accumulation
//
// Settings.Accumulate = k (training.accumulate) runs every step as k
// micro-batches of Batch/k examples and takes one optimizer step on
// their summed gradients: Batch stays the effective batch, as it stays
// the global batch of a data-parallel run, and k must divide it (with
// Comm, each process's share). A micro-batch is a shard of the step's
// batch exactly as a process's part is (graph.Program.Shard): Feed and
// the dropout and noise draws are those of the whole batch, and the
// micro-batches are weighed by their loss weights, so a step equals the
// step of one batch k times larger up to the order of the float sums.
// It composes with Comm (process r's micro-batch i is shard r·k+i of
// Size·k), and a run resumes exactly, with any k. See accumulate.go.
package train
