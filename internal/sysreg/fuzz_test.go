package sysreg

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// FuzzHandler feeds arbitrary bodies to an acceptor that already holds a
// value. It must answer every body with a known status, never panic,
// never stop, and answer a 200 with a reply to the request.
func FuzzHandler(f *testing.F) {
	v := regValue(1, "spec")
	seed := func(m caspaxos.Message) {
		b, err := wire.AppendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(prepareMsg(7, 1, ballot(20, 7)))
	seed(prepareMsg(7, 1, ballot(5, 7)))
	seed(acceptMsg(7, 1, ballot(20, 7), regValue(2, "spec-2")))
	seed(acceptMsg(7, 1, ballot(10, 3), v))
	seed(acceptMsg(7, 2, ballot(20, 7), v))
	other := prepareMsg(7, 1, ballot(20, 7))
	other.Items[0].Key = "other"
	seed(other)
	f.Add([]byte{})
	f.Add([]byte{1, 1, 7, 1, 0, 1})
	f.Fuzz(func(t *testing.T, body []byte) {
		st := caspaxos.NewMemoryStore()
		a, err := NewAcceptor(AcceptorConfig{ID: 1, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		pre := httptest.NewRecorder()
		a.ServeHTTP(pre, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(encode(t, acceptMsg(3, 1, ballot(10, 3), v)))))
		if pre.Code != http.StatusOK {
			t.Fatalf("seeding accept: %d %s", pre.Code, pre.Body.String())
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusMisdirectedRequest, http.StatusRequestEntityTooLarge:
			return
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		req, err := wire.DecodeMessage(body)
		if err != nil {
			t.Fatalf("200 for undecodable bytes: %v", err)
		}
		if _, err := decodeReply(req, rec.Body.Bytes()); err != nil {
			t.Fatalf("the reply does not answer the request: %v", err)
		}
		if err := a.Err(); err != nil {
			t.Fatal(err)
		}
		if err := a.acc.Violation(); err != nil {
			t.Fatal(err)
		}
		// Whatever was answered is on the store: a restart agrees.
		b, err := NewAcceptor(AcceptorConfig{ID: 1, Store: st.Reopen()})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := a.acc.Get(Key)
		again, _ := b.acc.Get(Key)
		if got.Promised != again.Promised || got.Accepted != again.Accepted || !got.Value.Equal(again.Value) {
			t.Fatalf("memory %+v, disk %+v", got, again)
		}
	})
}

// FuzzDecodeReply: the client's check of an acceptor's reply bytes never
// panics and passes only replies to the request.
func FuzzDecodeReply(f *testing.F) {
	req := prepareMsg(7, 1, ballot(5, 7))
	good, err := wire.AppendMessage(nil, caspaxos.Message{Type: caspaxos.MsgPrepareReply, From: 1, To: 7,
		Items: []caspaxos.Item{{Key: Key, Ballot: ballot(5, 7)}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("junk"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := decodeReply(req, raw)
		if err != nil {
			return
		}
		if m.Type != caspaxos.MsgPrepareReply || m.From != 1 || m.To != 7 || len(m.Items) > 1 {
			t.Fatalf("accepted %v", m)
		}
	})
}

// FuzzDecodeValue: the register value decoder never panics, accepts only
// canonical encodings (a decoded value re-encodes to the same bytes), and
// bounds what it returns.
func FuzzDecodeValue(f *testing.F) {
	f.Add(encodeValue(writeTag{writer: 7, seq: 1}, []byte("spec")))
	f.Add(encodeValue(writeTag{writer: 1 << 63, seq: 1 << 40}, []byte{0}))
	f.Add([]byte{1, 0x80, 0x00, 1, 'x'})
	f.Add([]byte{2, 1, 1, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		tag, spec, err := decodeValue(data)
		if err != nil {
			return
		}
		if tag.writer == 0 || tag.seq == 0 || len(spec) == 0 || len(spec) > MaxValueBytes {
			t.Fatalf("decoded %+v with %d spec bytes", tag, len(spec))
		}
		if again := encodeValue(tag, spec); !bytes.Equal(again, data) {
			t.Fatalf("not canonical: %x re-encodes as %x", data, again)
		}
	})
}
