package train

import (
	"fmt"
	"slices"
)

// Gradient accumulation (Settings.Accumulate = k) takes every optimizer
// step on k micro-batches of Batch/k examples, one after the other, so
// that a step of a large batch fits in the memory of a small one: the
// training program is compiled for the micro-batch, and Batch stays the
// step's effective batch (as it stays the global batch of a data-parallel
// run, where k splits each process's share: Batch must be a multiple of
// k times the processes).
//
// Micro-batch i of a step is shard i of k of the step's batch, exactly as
// a process's part of a data-parallel batch is (graph.Program.Shard): the
// task's Feed draws the whole batch from the run's generator, and the
// program keeps block i of it and of the dropout masks and noise a
// program of the whole batch would draw. To do so the generators are
// rewound before each micro-batch to where the step began, so Feed is
// called k times a step with the same generator state, and must draw the
// same batch each time (a function of the generator and the step, as
// Task.Feed asks); after the step they are where one Feed of the whole
// batch leaves them. The micro-batches' gradients, losses and tracked
// values are summed weighed by their loss weights (the count each loss is
// a mean over, graph.Builder.SetLossWeight: 1 for a mean over examples,
// the real tokens of a padded batch), then divided by the weights' sum:
// the step equals the step of one program of the whole batch up to the
// order of the float sums, for a loss that is one mean over the weight's
// units (a regression; a token cross-entropy), with the caveat of
// parallel.go's for a sum of means over different units (an ELBO's KL
// term). With Comm, process r's micro-batch i is shard r·k+i of Size·k,
// and the summed buffer is what the allreduce sums, so a step is the same
// with any split into processes and micro-batches.
//
// Checkpoints are written between steps, where the generators hold no
// trace of k: a run resumes exactly, and may resume with another k or
// another number of processes.
//
// One training program serves every micro-batch, so memory is that of a
// micro-batch; Shard builds the whole batch's graph once (not compiled,
// no values) and afterwards only moves the program to another part. Feed
// still runs k times, once for each micro-batch's draw of the global
// batch.

// MicroBatch is the batch of one micro-batch of one process: batch split
// over the processes of comm (nil: one) and then into accumulate
// micro-batches (0 or 1: none); both must divide it.
func MicroBatch(batch, accumulate int, comm Comm) (int, error) {
	local, err := LocalBatch(batch, comm)
	if err != nil {
		return 0, err
	}
	k := max(accumulate, 1)
	if local%k == 0 {
		return local / k, nil
	}
	if local == batch {
		return 0, fmt.Errorf("training.batch = %d: want a multiple of training.accumulate = %d, the micro-batches of a step", batch, k)
	}
	return 0, fmt.Errorf("training.batch = %d: want a multiple of training.accumulate = %d times the %d processes (each process's share of %d is split into %d micro-batches)",
		batch, k, batch/local, local, k)
}

// setupAccumulation makes the training program the first micro-batch of
// this process, which checks that the task's graph can be split so.
func (l *Loop) setupAccumulation() error {
	l.global = l.task.Build(l.set.Batch)
	if err := l.shardMicro(0); err != nil {
		return fmt.Errorf("train: accumulate %d: %w", l.accum, err)
	}
	return nil
}

// shardMicro makes the training program micro-batch i of this process.
func (l *Loop) shardMicro(i int) error {
	rank, size := 0, 1
	if l.parallel() {
		rank, size = l.set.Comm.Rank(), l.set.Comm.Size()
	}
	return l.train.Shard(rank*l.accum+i, size*l.accum, l.global)
}

// accumulateStep runs the forward and backward passes of every
// micro-batch of step next, and leaves the gradient of the whole step's
// batch (over all processes) in the training program for the optimizer.
// It returns the step's loss; l.tracked holds its tracked values.
func (l *Loop) accumulateStep(next int) (float64, error) {
	data, err := l.dataSrc.MarshalBinary()
	if err != nil {
		return 0, err
	}
	drop, err := l.dropSrc.MarshalBinary()
	if err != nil {
		return 0, err
	}
	var (
		acc          = l.reduceBuf[:0]
		names        []string
		lossSum, wts float64
		sums         []float64
	)
	for i := range l.accum {
		if i > 0 { // every micro-batch draws from where the step began
			if err := l.dataSrc.UnmarshalBinary(data); err != nil {
				return 0, err
			}
			if err := l.dropSrc.UnmarshalBinary(drop); err != nil {
				return 0, err
			}
		}
		if err := l.shardMicro(i); err != nil {
			return 0, err
		}
		if err := l.forwardBackward(next); err != nil {
			return 0, err
		}
		w := l.train.LossWeight()
		tracked := l.train.PenaltyValues()
		if i == 0 {
			if acc, err = l.train.AppendGradients(acc, w); err != nil {
				return 0, err
			}
			for name := range tracked {
				names = append(names, name)
			}
			slices.Sort(names)
			sums = make([]float64, len(names))
		} else {
			if l.gradBuf, err = l.train.AppendGradients(l.gradBuf[:0], w); err != nil {
				return 0, err
			}
			for j, g := range l.gradBuf {
				acc[j] += g
			}
		}
		lossSum += w * l.train.Loss()
		wts += w
		for j, name := range names {
			sums[j] += w * tracked[name]
		}
	}
	buf := append(acc, lossSum, wts)
	buf = append(buf, sums...)
	l.reduceBuf = buf
	loss, tracked, err := l.finishReduce(buf, names, map[string]float64{})
	if err != nil {
		return 0, err
	}
	l.tracked = tracked
	return loss, nil
}
