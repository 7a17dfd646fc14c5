package partition

import "fmt"

// ExecReads runs a Ready's reads and fetches against st, after its writes
// were committed. Read replies carry the value and a session token: the
// replica's applied position merged with the position of the value read.
func ExecReads(st Store, rd *Ready) (replies []Reply, fetched []FetchResult) {
	if len(rd.Reads) > 0 {
		replies = make([]Reply, 0, len(rd.Reads))
	}
	for i := range rd.Reads {
		r := &rd.Reads[i]
		rep := Reply{Kind: ReplyRead, Partition: r.Partition, Ref: r.Ref, Token: r.Token, Epoch: r.Epoch}
		kv, ok, err := st.Get(r.Partition, r.Key)
		switch {
		case err != nil:
			rep.Err = fmt.Errorf("partition %d: read %q: %w", r.Partition, r.Key, err)
		case ok:
			rep.Value, rep.Found = kv.Value, true
			rep.Version = Token{Epoch: kv.Epoch, LSN: kv.LSN}
			if rep.Value == nil {
				rep.Value = []byte{}
			}
			rep.Token = rep.Token.Max(Token{Epoch: kv.Epoch, LSN: kv.LSN})
		}
		replies = append(replies, rep)
	}
	for i := range rd.Fetches {
		f := rd.Fetches[i]
		res := FetchResult{Fetch: f}
		switch f.Kind {
		case FetchLog:
			res.Ops, res.Err = st.ReadLog(f.Partition, f.From, f.MaxOps, f.MaxBytes)
		case FetchState:
			res.KVs, res.More, res.Applied, res.Err = st.ReadKV(f.Partition, f.After, f.MaxBytes)
		case FetchKey:
			var (
				kv KV
				ok bool
			)
			if kv, ok, res.Err = st.Get(f.Partition, f.Key); ok && res.Err == nil {
				res.KVs = []KV{kv}
			}
		default:
			res.Err = fmt.Errorf("partition %d: fetch kind %d: %w", f.Partition, f.Kind, ErrBadRequest)
		}
		fetched = append(fetched, res)
	}
	return replies, fetched
}
