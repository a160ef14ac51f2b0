// Package optim is the optimizer: Adam with decoupled weight decay and
// global-norm clipping, whose moments and step count a checkpoint carries
// (State, SetState), so a resumed run continues bit for bit.
//
// It updates the parameters a training program uses in place, reading the
// program's gradients through graph's small exported surface
// (Program.Training, Program.Params, Program.GradientData, Param.Data), and
// runs the element-wise update on the cores with graph/internal/kernels
// (vec.c's float32 loop where the build has it, the Go loop otherwise). It
// imports no Gorgonia; package graph does not import it.
package optim
