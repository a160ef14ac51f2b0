// Package tasks holds probformer's built-in training tasks, each a
// train.Task registered under its config's task name when the package is
// imported:
//
//   - maxnorm (maxnorm.go): regress the element of largest norm of a set
//     with a Set Transformer;
//   - seq2seq (seq2seq.go): translate sentences with a Transformer, scored
//     by BLEU; its checkpoints also translate (Seq2Seq.Translate) and show
//     their cross-attention (Seq2Seq.CrossAttention);
//   - segment (segment.go): interactive segmentation of synthetic images
//     with EM attention, the clicks its annotated units;
//   - mlm (mlm.go): pretrain a Transformer encoder as a masked language
//     model, for a seq2seq run to start from.
//
// Each owns the types of its config's data: and model: sections
// (sections.go: MaxNormData, Seq2SeqData, … with their rules), registered
// with it by one train.Register call (register.go). Their unexported
// fields are the other built-in tasks' keys, which every config and
// checkpoint written before each task owned its sections holds: they
// still read, must be zero, and are written back at their old places, so
// that those files stay byte for byte what they were. They use nothing but
// the API of github.com/probformer/probformer/cmd/trainer/train that a
// user's task has: a program that imports this package and calls
// train.NewTask and train.New trains any of them, as `trainer train` does.
package tasks
