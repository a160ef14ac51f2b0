package graph

import G "gorgonia.org/gorgonia"

// gInverseSqrt is Gorgonia's InverseSqrt, whose gradient is wrong; only the
// test that proves the gradient checker can fail uses it.
func gInverseSqrt(x *Node) (*Node, error) { return G.InverseSqrt(x) }
