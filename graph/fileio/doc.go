// Package fileio is how the trainer reads and replaces its files: a write
// lands whole or not at all (WriteFileAtomic), and a read opens only a
// regular file (OpenRegular), so a path that names a directory, a pipe or a
// device is refused with an error matching ErrNotRegular rather than read
// or replaced.
//
// It imports nothing of the module and nothing of Gorgonia, so a package
// that only writes files (the figures, say) need not import graph.
package fileio
