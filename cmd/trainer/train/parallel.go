package train

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"

	"github.com/probformer/probformer/graph/ckpt"
)

// Comm is the group of processes of a data-parallel run, as MPI's
// MPI_COMM_WORLD is (package mpi implements it over Open MPI). Every
// process calls each method in the same order; a call returns once all
// have made it.
type Comm interface {
	// Rank is this process's number, 0 … Size−1; rank 0 leads the run.
	Rank() int
	// Size is the number of processes.
	Size() int
	// AllreduceSum replaces buf, on every process, with the element-wise
	// sum of every process's buf. All bufs have the same length.
	AllreduceSum(buf []float64) error
	// Broadcast replaces buf, on every process, with root's buf. All bufs
	// have the same length.
	Broadcast(buf []byte, root int) error
}

// Data-parallel training (Settings.Comm) runs one Loop per process.
// Every process builds the same graphs and draws the same global batch
// of Settings.Batch examples from the run's generator; its training
// program keeps shard Rank of Size of it (graph.Program.Shard), dropout
// masks and noise included. After the backward pass one flat buffer is
// summed over the processes:
//
//	[w_r·∇L_r …, w_r·L_r, w_r, w_r·t_r …]
//
// where L_r is process r's loss, w_r its loss weight (the count the loss
// is a mean over, graph.Program.LossWeight) and t_r its tracked values.
// Dividing by Σ w_r gives every process the gradient, loss and tracked
// values of the global batch, as one process would compute them up to
// the order of the float sums; every process then takes the same Adam
// step. That is exact when the loss is one mean over the weight's units
// (a regression over examples, a cross-entropy over real tokens); a sum
// of means over different units, such as an ELBO's KL term (a mean over a
// shard's queries) added to a token cross-entropy, has its parts weighed
// by the shards' token counts, close to but not exactly one process's
// objective. A non-finite loss or gradient on any process is non-finite
// in the sum, so every process stops at the same step.
//
// Rank 0 alone writes metrics.jsonl and checkpoints, validates and shows
// progress. The checkpoints are those of a single process (the
// generators are the run's, not the process's), so a run resumes at any
// number of processes, or without MPI.

// parallel reports whether the loop is one process of several.
func (l *Loop) parallel() bool { return l.set.Comm != nil && l.set.Comm.Size() > 1 }

// lead reports whether this process writes the run's files: always
// without a Comm, and on rank 0 with one.
func (l *Loop) lead() bool { return l.set.Comm == nil || l.set.Comm.Rank() == 0 }

// setupParallel checks the batch splits over the processes, makes the
// training program this process's shard and gives every process rank 0's
// parameters.
func (l *Loop) setupParallel() error {
	c := l.set.Comm
	if c.Size() < 1 || c.Rank() < 0 || c.Rank() >= c.Size() {
		return fmt.Errorf("train: rank %d of %d processes", c.Rank(), c.Size())
	}
	if !l.parallel() {
		return nil
	}
	if l.accum > 1 { // every micro-batch is a shard of its own (accumulate.go)
		return l.broadcastParams()
	}
	if err := l.train.Shard(c.Rank(), c.Size(), l.task.Build(l.set.Batch)); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return l.broadcastParams()
}

// LocalBatch is the batch one process of comm trains on: the global
// batch split over the processes, which must divide it. comm may be nil
// (one process). With gradient accumulation a process trains on
// micro-batches of it (MicroBatch).
func LocalBatch(batch int, comm Comm) (int, error) {
	if comm == nil || comm.Size() <= 1 {
		return batch, nil
	}
	if n := comm.Size(); batch%n != 0 {
		return 0, fmt.Errorf("training.batch = %d: want a multiple of the %d processes, each training on an equal share", batch, n)
	}
	return batch / comm.Size(), nil
}

// broadcastParams sets every process's parameters to rank 0's, so that
// all start equal even if a user's Init draws differently per process.
func (l *Loop) broadcastParams() error {
	var buf bytes.Buffer
	for _, p := range l.params.List() {
		binary.Write(&buf, binary.LittleEndian, p.Values()) // a bytes.Buffer never fails
	}
	data := buf.Bytes()
	if err := l.set.Comm.Broadcast(data, 0); err != nil {
		return fmt.Errorf("broadcast parameters: %w", err)
	}
	for _, p := range l.params.List() {
		v := make([]float64, len(p.Values()))
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		data = data[8*len(v):]
		if err := p.SetValues(v); err != nil {
			return fmt.Errorf("broadcast parameters: %s: %w", p.Name, err)
		}
	}
	return nil
}

// reduceStep averages the gradients, the loss and the tracked values of
// the last run (loss and tracked) over the processes, weighted by their
// loss weights, and sets the averaged gradients back for the optimizer.
// It returns the global batch's loss and tracked values.
func (l *Loop) reduceStep(loss float64, tracked map[string]float64) (float64, map[string]float64, error) {
	w := l.train.LossWeight()
	buf, err := l.train.AppendGradients(l.reduceBuf[:0], w)
	if err != nil {
		return 0, nil, err
	}
	names := make([]string, 0, len(tracked))
	for name := range tracked {
		names = append(names, name)
	}
	slices.Sort(names)
	buf = append(buf, w*loss, w)
	for _, name := range names {
		buf = append(buf, w*tracked[name])
	}
	l.reduceBuf = buf
	return l.finishReduce(buf, names, tracked)
}

// finishReduce sums buf, [Σ w·∇L …, Σ w·L, Σ w, Σ w·t …] with the tracked
// values t in the order of names, over the processes (if there are
// several), sets the gradients to Σ w·∇L / Σ w for the optimizer, and
// returns the loss and tracked values, each divided by Σ w.
func (l *Loop) finishReduce(buf []float64, names []string, tracked map[string]float64) (float64, map[string]float64, error) {
	if l.parallel() {
		start := l.set.Clock()
		if err := l.set.Comm.AllreduceSum(buf); err != nil {
			return 0, nil, fmt.Errorf("allreduce gradients: %w", err)
		}
		l.reduceSec += l.set.Clock().Sub(start).Seconds()
	}
	rest, err := l.train.SetGradients(buf, 1/buf[len(buf)-len(names)-1])
	if err != nil {
		return 0, nil, err
	}
	total := rest[1]
	for i, name := range names {
		tracked[name] = rest[2+i] / total
	}
	return rest[0] / total, tracked, nil
}

// agreeToStop reports whether any process's context is done, so that
// every process stops after the same step.
func (l *Loop) agreeToStop(done bool) (bool, error) {
	flag := []float64{0}
	if done {
		flag[0] = 1
	}
	if err := l.set.Comm.AllreduceSum(flag); err != nil {
		return false, fmt.Errorf("allreduce stop: %w", err)
	}
	return flag[0] > 0, nil
}

// ErrRanksDiffer is the error of a data-parallel run whose processes'
// parameters or optimizer state are no longer equal at a checkpoint: a
// bug, or a reduction that does not give every process the same sum.
var ErrRanksDiffer = errors.New("the processes' parameters differ")

// checkRanksAgree compares a digest of every process's parameters and
// optimizer state with rank 0's, before a checkpoint is written; all
// processes call it. Like PyTorch DDP's check of its replicas, it costs
// one pass over the weights.
func (l *Loop) checkRanksAgree() error {
	h := fnv.New64a()
	for _, p := range l.params.List() {
		binary.Write(h, binary.LittleEndian, p.Values())
	}
	st := l.opt.State()
	binary.Write(h, binary.LittleEndian, int64(st.Step))
	for _, name := range slices.Sorted(maps.Keys(st.M)) {
		binary.Write(h, binary.LittleEndian, st.M[name])
		binary.Write(h, binary.LittleEndian, st.V[name])
	}
	mine := h.Sum(nil)
	root := slices.Clone(mine)
	if err := l.set.Comm.Broadcast(root, 0); err != nil {
		return fmt.Errorf("broadcast digest: %w", err)
	}
	differ := []float64{0}
	if !bytes.Equal(mine, root) {
		differ[0] = 1
	}
	if err := l.set.Comm.AllreduceSum(differ); err != nil {
		return fmt.Errorf("allreduce digest: %w", err)
	}
	if differ[0] > 0 {
		return fmt.Errorf("step %d: %w from rank 0's on %d of %d processes", l.step, ErrRanksDiffer, int(differ[0]), l.set.Comm.Size())
	}
	return nil
}

// ShareCheckpoint gives every process of comm rank 0's checkpoint: rank 0
// passes the checkpoint it read (the others' ck is ignored) and every
// process gets a copy, so that only rank 0 needs the run directory (the
// others may run on machines without it).
func ShareCheckpoint(comm Comm, ck *ckpt.Checkpoint) (*ckpt.Checkpoint, error) {
	if comm == nil || comm.Size() <= 1 {
		return ck, nil
	}
	var data []byte
	if comm.Rank() == 0 {
		var err error
		if data, err = ckpt.EncodeCheckpoint(ck); err != nil {
			return nil, fmt.Errorf("share checkpoint: %w", err)
		}
	}
	size := make([]byte, 8)
	binary.LittleEndian.PutUint64(size, uint64(len(data)))
	if err := comm.Broadcast(size, 0); err != nil {
		return nil, fmt.Errorf("share checkpoint: %w", err)
	}
	if comm.Rank() != 0 {
		data = make([]byte, binary.LittleEndian.Uint64(size))
	}
	if err := comm.Broadcast(data, 0); err != nil {
		return nil, fmt.Errorf("share checkpoint: %w", err)
	}
	if comm.Rank() == 0 {
		return ck, nil
	}
	return ckpt.DecodeCheckpoint(data)
}
