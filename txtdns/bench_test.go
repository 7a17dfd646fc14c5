package txtdns

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkRespond is the server's work per query minus the socket: unpack
// the query, build the answer, pack it.
func BenchmarkRespond(b *testing.B) {
	p := populated(b)
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Authority: p})
	if err != nil {
		b.Fatal(err)
	}
	q := new(dns.Msg)
	q.SetQuestion("p-300.fm.example.", dns.TypeTXT)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	b.ReportAllocs()
	for b.Loop() {
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			b.Fatal(err)
		}
		resp := s.Respond(req, false)
		if _, err := resp.Pack(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServerUDP is ping-pong queries over loopback UDP against a live
// server in this process, from GOMAXPROCS*8 clients (the cross-process
// figure is `fmnode bench dns`).
func BenchmarkServerUDP(b *testing.B) {
	p := populated(b)
	s := startServer(b, p)
	q := new(dns.Msg)
	q.SetQuestion("p-300.fm.example.", dns.TypeTXT)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", s.Addr())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 2048)
		for pb.Next() {
			if _, err := c.Write(wire); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
