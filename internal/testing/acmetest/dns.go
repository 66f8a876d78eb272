package acmetest

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DNS is an authoritative server for one zone on loopback UDP and TCP (one
// port). It answers A 127.0.0.1 for every name, so Pebble's VA reaches the
// test's listeners; it serves the zone's SOA and the TXT records it holds,
// and applies RFC 2136 updates only when they carry a valid TSIG of its key.
type DNS struct {
	Addr    string // host:port, UDP and TCP
	zone    string // fqdn
	keyName string // fqdn

	mu       sync.Mutex          // guards the fields below
	txt      map[string][]string // fqdn → values
	accepted int                 // signed updates applied
	refused  int                 // updates refused for a missing or bad TSIG
}

// StartDNS serves zone until cleanup, accepting updates signed with the
// TSIG key keyName and its base64 secret.
func StartDNS(t testing.TB, zone, keyName, secret string) *DNS {
	t.Helper()
	// Pebble's VA asks over TCP, certmagic over UDP: serve both on one port.
	var pc net.PacketConn
	var ln net.Listener
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no free port for both UDP and TCP")
	}
	d := &DNS{
		Addr:    pc.LocalAddr().String(),
		zone:    dns.CanonicalName(zone),
		keyName: dns.CanonicalName(keyName),
		txt:     make(map[string][]string),
	}
	for _, srv := range []*dns.Server{{PacketConn: pc}, {Listener: ln}} {
		srv.Handler = d
		// The default accept func answers NOTIMP to UPDATE.
		srv.MsgAcceptFunc = func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }
		srv.TsigSecret = map[string]string{d.keyName: secret}
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ActivateAndServe()
		}()
		<-started
		t.Cleanup(func() {
			srv.Shutdown()
			<-done
		})
	}
	return d
}

// ServeDNS implements dns.Handler.
func (d *DNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if r.Opcode == dns.OpcodeUpdate {
		d.update(w, r, m)
		return
	}
	for _, q := range r.Question {
		name := strings.ToLower(q.Name)
		switch q.Qtype {
		case dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
				A:   net.IPv4(127, 0, 0, 1),
			})
		case dns.TypeTXT:
			d.mu.Lock()
			for _, v := range d.txt[name] {
				m.Answer = append(m.Answer, &dns.TXT{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1},
					Txt: []string{v},
				})
			}
			d.mu.Unlock()
		case dns.TypeSOA:
			if name == d.zone {
				m.Answer = append(m.Answer, &dns.SOA{
					Hdr: dns.RR_Header{Name: d.zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 1},
					Ns:  "ns." + d.zone, Mbox: "hostmaster." + d.zone,
					Serial: 1, Refresh: 60, Retry: 60, Expire: 600, Minttl: 1,
				})
			}
		}
	}
	w.WriteMsg(m)
}

// update applies an RFC 2136 update if its TSIG verified (the server checks
// the MAC with TsigSecret and reports the result in TsigStatus).
func (d *DNS) update(w dns.ResponseWriter, r *dns.Msg, m *dns.Msg) {
	tsig := r.IsTsig()
	if tsig == nil || w.TsigStatus() != nil || dns.CanonicalName(tsig.Hdr.Name) != d.keyName {
		d.mu.Lock()
		d.refused++
		d.mu.Unlock()
		m.Rcode = dns.RcodeNotAuth
		w.WriteMsg(m)
		return
	}
	defer func() {
		m.SetTsig(d.keyName, tsig.Algorithm, 300, time.Now().Unix())
		w.WriteMsg(m)
	}()
	if len(r.Question) != 1 || dns.CanonicalName(r.Question[0].Name) != d.zone {
		m.Rcode = dns.RcodeNotZone
		return
	}
	d.mu.Lock()
	for _, rr := range r.Ns {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		switch h.Class {
		case dns.ClassINET: // add
			if txt, ok := rr.(*dns.TXT); ok {
				d.txt[name] = append(d.txt[name], strings.Join(txt.Txt, ""))
			}
		case dns.ClassNONE: // delete one RR
			if txt, ok := rr.(*dns.TXT); ok {
				v := strings.Join(txt.Txt, "")
				kept := d.txt[name][:0]
				for _, old := range d.txt[name] {
					if old != v {
						kept = append(kept, old)
					}
				}
				d.txt[name] = kept
			}
		case dns.ClassANY: // delete an RRset or a name
			delete(d.txt, name)
		}
	}
	d.accepted++
	d.mu.Unlock()
}

// Counts returns how many updates were applied and how many were refused
// for a missing or bad TSIG.
func (d *DNS) Counts() (accepted, refused int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.accepted, d.refused
}

// TXT returns the TXT values held for name.
func (d *DNS) TXT(name string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.txt[dns.CanonicalName(name)]...)
}
