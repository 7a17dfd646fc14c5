package partition

// Exports for the external tests (package partition_test). Those are the
// tests that drive a partitiontest.Cluster: that package imports partition,
// so they cannot be inside package partition; they share these helpers and
// internals with the in-package tests.
var (
	SampleRegions   = testRegions
	SampleQuorum    = testQuorum
	LevelOf         = levelOf
	SmallHostConfig = testHostConfig
	AppendPrefix    = appendPrefix
)

// Store sections the external tests inspect raw keys of.
const (
	SecLog  = secLog
	SecUndo = secUndo
)
