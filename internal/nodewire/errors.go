package nodewire

import "errors"

var (
	// ErrCorrupt: received bytes do not decode as a batch. Every Decode and
	// ReadFrame failure caused by the bytes wraps it (failures inside a
	// CASPaxos message or the framing also wrap caspaxos.ErrCorrupt).
	ErrCorrupt = errors.New("nodewire: corrupt batch")
	// ErrInvalid: Encode refused a batch the decoder would refuse (an
	// unknown type or kind, a bound exceeded, an unsorted node list).
	ErrInvalid = errors.New("nodewire: batch cannot be encoded")
)
