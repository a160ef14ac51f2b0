package tasks

import (
	"fmt"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
)

// The built-in tasks register through train.Register, the one call a
// user's task makes too: the types of their config sections
// (sections.go), their rules and their constructors. Importing the
// package makes them available to configs.Load and train.NewTask by name.
func init() {
	for _, err := range []error{
		train.Register("maxnorm", train.Spec[MaxNormData, MaxNormModel]{Check: checkMaxNorm,
			New: func(cfg *configs.Config, d *MaxNormData, m *MaxNormModel, _ map[string][]byte) (train.Task, error) {
				return asTask(newMaxNormTask(cfg, d, m))
			}}),
		train.Register("seq2seq", train.Spec[Seq2SeqData, TransformerModel]{Check: checkSeq2Seq,
			New: func(cfg *configs.Config, d *Seq2SeqData, m *TransformerModel, state map[string][]byte) (train.Task, error) {
				return asTask(newSeq2Seq(cfg, d, m, state))
			}}),
		train.Register("segment", train.Spec[SegmentData, SegmentModel]{Check: checkSegment,
			New: func(cfg *configs.Config, d *SegmentData, m *SegmentModel, _ map[string][]byte) (train.Task, error) {
				return asTask(newSegmentTask(cfg, d, m))
			}}),
		train.Register("mlm", train.Spec[MLMData, TransformerModel]{Check: checkMLM,
			New: func(cfg *configs.Config, d *MLMData, m *TransformerModel, state map[string][]byte) (train.Task, error) {
				return asTask(newMLMTask(cfg, d, m, state))
			}}),
		train.Register("bert", train.Spec[BERTData, TransformerModel]{Check: checkBERT,
			New: func(cfg *configs.Config, d *BERTData, m *TransformerModel, state map[string][]byte) (train.Task, error) {
				return asTask(newBERTTask(cfg, d, m, state))
			}}),
	} {
		if err != nil {
			panic(fmt.Sprintf("built-in task: %v", err)) // a programming error, found by every test
		}
	}
}

// asTask returns a task constructor's result as a train.Task, with no
// typed nil on error.
func asTask[T train.Task](t T, err error) (train.Task, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}
