package tasks

import (
	"fmt"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
)

// The built-in tasks register through train.Register, the API a user's
// task has too; importing the package makes them available to
// train.NewTask by name.
func init() {
	builtin := []struct {
		name string
		f    train.Factory
	}{
		{"maxnorm", func(cfg *configs.Config, _ map[string][]byte) (train.Task, error) { return asTask(newMaxNormTask(cfg)) }},
		{"seq2seq", func(cfg *configs.Config, state map[string][]byte) (train.Task, error) {
			return asTask(newSeq2Seq(cfg, state))
		}},
		{"segment", func(cfg *configs.Config, _ map[string][]byte) (train.Task, error) { return asTask(newSegmentTask(cfg)) }},
		{"mlm", func(cfg *configs.Config, state map[string][]byte) (train.Task, error) {
			return asTask(newMLMTask(cfg, state))
		}},
	}
	for _, b := range builtin {
		if err := train.Register(b.name, b.f); err != nil {
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
