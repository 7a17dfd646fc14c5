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

// OneBasedHashPartitioner is HashPartitioner shifted up by one: fmnode
// numbers its partitions 1..n (0 is no partition), so its agents and its
// clients map a key to FNV-1a modulo n, plus one. Partitions is n+1, so
// that every id it returns is below it.
type OneBasedHashPartitioner struct{ h HashPartitioner }

// NewOneBasedHashPartitioner returns a partitioner over partitions 1..n.
func NewOneBasedHashPartitioner(n uint32) (OneBasedHashPartitioner, error) {
	if n == 0 || n == ^uint32(0) {
		return OneBasedHashPartitioner{}, configErr("PartitionCount", "must be in 1..%d", ^uint32(0)-1)
	}
	return OneBasedHashPartitioner{h: HashPartitioner{n: n}}, nil
}

// Partition implements Partitioner.
func (o OneBasedHashPartitioner) Partition(key string) uint32 { return o.h.Partition(key) + 1 }

// Partitions implements Partitioner.
func (o OneBasedHashPartitioner) Partitions() uint32 { return o.h.n + 1 }
