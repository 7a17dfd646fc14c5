package caspaxos

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestAcceptorScripts replays protocol stories from testdata/acceptor: each
// directive is one request to a single acceptor; the output shows the reply
// and what had to be made durable before it could be sent. "crash" drops
// what was stepped but not yet persisted and recovers from the store.
func TestAcceptorScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/acceptor", func(t *testing.T, path string) {
		store := NewMemoryStore()
		a, err := NewAcceptor(1, State{})
		if err != nil {
			t.Fatal(err)
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var from, age uint64
			var key string
			var ballot, next Ballot
			var val Value
			noPersist := false
			for _, arg := range d.CmdArgs {
				switch arg.Key {
				case "from":
					from = mustUint(t, arg.Vals[0])
				case "age":
					age = mustUint(t, arg.Vals[0])
				case "key":
					key = arg.Vals[0]
				case "ballot":
					ballot = mustBallot(t, arg.Vals[0])
				case "next":
					next = mustBallot(t, arg.Vals[0])
				case "value":
					// value=VERSION:DATA or value=VERSION:tombstone
					ver, data, _ := strings.Cut(arg.Vals[0], ":")
					val = Value{Version: mustUint(t, ver)}
					if data == "tombstone" {
						val.Tombstone = true
					} else if data != "" {
						val.Data = []byte(data)
					}
				case "no-persist":
					noPersist = true
				default:
					t.Fatalf("%s: unknown argument %s", d.Pos, arg.Key)
				}
			}
			m := Message{From: NodeID(from), To: 1, Age: age}
			switch d.Cmd {
			case "prepare":
				m.Type = MsgPrepare
			case "accept":
				m.Type = MsgAccept
			case "erase":
				m.Type = MsgErase
			case "raise-age":
				m.Type = MsgRaiseAge
			case "crash":
				st, err := store.Load()
				if err != nil {
					t.Fatal(err)
				}
				a.Ready() // whatever was not persisted is lost
				if a, err = NewAcceptor(1, st); err != nil {
					t.Fatal(err)
				}
				return dumpAcceptor(a)
			case "dump":
				return dumpAcceptor(a)
			default:
				t.Fatalf("%s: unknown command %s", d.Pos, d.Cmd)
			}
			if m.Type != MsgRaiseAge {
				m.Items = []Item{{Key: key, Ballot: ballot, Next: next, Value: val}}
			}
			if err := a.Step(m); err != nil {
				return "error: " + err.Error()
			}
			if noPersist {
				return "(stepped, not persisted)"
			}
			batch, out := a.Ready()
			if err := store.Apply(batch); err != nil {
				t.Fatal(err)
			}
			var sb strings.Builder
			for _, r := range batch.Put {
				if r.Key == eraseFloorKey {
					fmt.Fprintf(&sb, "persist erase-floor=%v\n", r.Promised)
					continue
				}
				fmt.Fprintf(&sb, "persist %s promised=%v accepted=%v value=%v\n", r.Key, r.Promised, r.Accepted, r.Value)
			}
			for _, k := range batch.Delete {
				fmt.Fprintf(&sb, "persist delete %s\n", k)
			}
			if batch.AgeFloor != 0 {
				fmt.Fprintf(&sb, "persist age-floor=%d\n", batch.AgeFloor)
			}
			for _, r := range out {
				fmt.Fprintf(&sb, "reply %v age=%d", r.Type, r.Age)
				for _, it := range r.Items {
					fmt.Fprintf(&sb, " %s %v", it.Key, it.Reject)
					if it.Reject == RejectNone && r.Type == MsgPrepareReply {
						fmt.Fprintf(&sb, " accepted=%v value=%v", it.Accepted, it.Value)
					}
					if !it.Conflict.IsZero() {
						fmt.Fprintf(&sb, " conflict=%v", it.Conflict)
					}
				}
				sb.WriteString("\n")
			}
			if err := a.Violation(); err != nil {
				fmt.Fprintf(&sb, "VIOLATION %v\n", err)
			}
			return sb.String()
		})
	})
}

func dumpAcceptor(a *Acceptor) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "age-floor=%d erase-floor=%v\n", a.AgeFloor(), a.EraseFloor())
	for _, k := range a.Keys() {
		r, _ := a.Get(k)
		fmt.Fprintf(&sb, "%s promised=%v accepted=%v value=%v\n", k, r.Promised, r.Accepted, r.Value)
	}
	return sb.String()
}

func mustUint(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustBallot(t *testing.T, s string) Ballot {
	c, p, ok := strings.Cut(s, ".")
	if !ok {
		t.Fatalf("ballot %q is not COUNTER.PROPOSER", s)
	}
	return Ballot{Counter: mustUint(t, c), Proposer: NodeID(mustUint(t, p))}
}
