package partition

import (
	"encoding/json"
	"fmt"
	"io"
)

// conflictJSON is the export format of a conflict record: one JSON object
// per line. Keys and values are byte strings, exported base64-encoded.
type conflictJSON struct {
	Partition ID     `json:"partition"`
	Epoch     Epoch  `json:"epoch"`
	LSN       LSN    `json:"lsn"`
	Key       []byte `json:"key"`
	Value     []byte `json:"value,omitempty"`
	Delete    bool   `json:"delete,omitempty"`
	RemovedAt Epoch  `json:"removed_at_epoch"`
	Reason    string `json:"reason"`
}

// ExportConflicts writes every conflict record of partition p to w as JSON
// lines, in (epoch, LSN) order, reading the store in pages. It returns the
// number written and the position of the last one (for PurgeConflicts).
func ExportConflicts(w io.Writer, st Store, p ID) (int, Token, error) {
	const page = 512
	enc := json.NewEncoder(w)
	var after, last Token
	n := 0
	for {
		recs, err := st.Conflicts(p, after, page)
		if err != nil {
			return n, last, fmt.Errorf("export conflicts of partition %d: %w", p, err)
		}
		for i := range recs {
			c := &recs[i]
			j := conflictJSON{Partition: p, Epoch: c.Op.Epoch, LSN: c.Op.LSN, Key: c.Op.Key, Value: c.Op.Value,
				Delete: c.Op.Delete, RemovedAt: c.RemovedAt, Reason: c.Reason.String()}
			if err := enc.Encode(&j); err != nil {
				return n, last, fmt.Errorf("export conflicts of partition %d: %w", p, err)
			}
			n++
			last = Token{Epoch: c.Op.Epoch, LSN: c.Op.LSN}
		}
		if len(recs) < page {
			return n, last, nil
		}
		after = last
	}
}

// PurgeConflicts deletes p's conflict records up to and including the
// position through (as returned by ExportConflicts). Operators call it
// after an export; nothing else deletes conflict records.
func PurgeConflicts(st Store, p ID, through Token) error {
	if through == (Token{}) {
		return nil
	}
	if err := st.Commit([]Write{{Partition: p, PurgeConflictsThrough: through}}); err != nil {
		return fmt.Errorf("purge conflicts of partition %d through %v: %w", p, through, err)
	}
	return nil
}
