// Package datasets generates and loads the data of probformer's tasks as
// plain Go slices: padded batches with masks, ready to feed to a graph.
// Every generator draws from a caller's seeded *rand.Rand, so a run's data
// is reproducible and its generator state can be checkpointed.
package datasets
