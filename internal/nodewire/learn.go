package nodewire

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// minLearnBytes: key length, version, data length.
const minLearnBytes = 3

func checkLearn(l *Learn) error {
	if len(l.Key) > MaxLearnKeyBytes {
		return fmt.Errorf("key of %d bytes exceeds %d", len(l.Key), MaxLearnKeyBytes)
	}
	if len(l.Data) > MaxLearnDataBytes {
		return fmt.Errorf("data of %d bytes exceeds %d", len(l.Data), MaxLearnDataBytes)
	}
	return nil
}

func appendLearn(dst []byte, l *Learn) ([]byte, error) {
	if err := checkLearn(l); err != nil {
		return dst, err
	}
	dst = appendString(dst, l.Key)
	dst = binary.AppendUvarint(dst, l.Version)
	return appendBytes(dst, l.Data), nil
}

// decodeLearn decodes one Learn; Data is its own allocation (the watcher
// keeps it as the register's value), empty is nil.
func decodeLearn(r *reader, l *Learn) {
	l.Key = string(r.bytes("learn key", MaxLearnKeyBytes))
	l.Version = r.uvarint("learn version")
	if d := r.bytes("learn data", MaxLearnDataBytes); d != nil {
		l.Data = bytes.Clone(d)
	}
}

// minLearnAckBytes: key length, version.
const minLearnAckBytes = 2

func appendLearnAck(dst []byte, a *LearnAck) ([]byte, error) {
	if len(a.Key) > MaxLearnKeyBytes {
		return dst, fmt.Errorf("key of %d bytes exceeds %d", len(a.Key), MaxLearnKeyBytes)
	}
	dst = appendString(dst, a.Key)
	return binary.AppendUvarint(dst, a.Version), nil
}

func decodeLearnAck(r *reader, a *LearnAck) {
	a.Key = string(r.bytes("learn ack key", MaxLearnKeyBytes))
	a.Version = r.uvarint("learn ack version")
}
