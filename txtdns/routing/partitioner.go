package routing

// Partitioner maps an application's partition key to a partition.
type Partitioner interface {
	Partition(key string) uint32
	// Partitions is the number of partitions; Partition returns less.
	Partitions() uint32
}

// HashPartitioner spreads keys over n partitions with 64-bit FNV-1a modulo
// n. It allocates nothing.
type HashPartitioner struct{ n uint32 }

// NewHashPartitioner returns a partitioner over n partitions.
func NewHashPartitioner(n uint32) (HashPartitioner, error) {
	if n == 0 {
		return HashPartitioner{}, configErr("PartitionCount", "must be at least 1")
	}
	return HashPartitioner{n: n}, nil
}

// Partition implements Partitioner.
func (h HashPartitioner) Partition(key string) uint32 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	x := uint64(offset)
	for i := 0; i < len(key); i++ {
		x ^= uint64(key[i])
		x *= prime
	}
	return uint32(x % uint64(h.n))
}

// Partitions implements Partitioner.
func (h HashPartitioner) Partitions() uint32 { return h.n }
