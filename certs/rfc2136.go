package certs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/libdns/libdns"
	"github.com/miekg/dns"

	"github.com/previewgate/previewgate/config"
)

// RFC2136 is a libdns provider that adds and deletes records through RFC 2136
// dynamic updates signed with TSIG (RFC 8945), as BIND, Knot, PowerDNS and
// many DNS hosts accept. It implements what certmagic's DNS-01 solver needs
// (libdns.RecordAppender and libdns.RecordDeleter) and is safe for
// concurrent use.
type RFC2136 struct {
	Server string // host:port of the primary that accepts updates

	keyName string // fqdn, lowercase
	alg     string // fqdn, e.g. "hmac-sha256."
	secret  string // base64, as miekg/dns wants it
	// timeout bounds one exchange when ctx has no earlier deadline.
	timeout time.Duration
}

var _ certmagic.DNSProvider = (*RFC2136)(nil)

// NewRFC2136 checks c and returns a provider for it. TSIGAlg zero means
// hmac-sha256; the server's port defaults to 53.
func NewRFC2136(c config.RFC2136) (*RFC2136, error) {
	if c.Server == "" {
		return nil, errors.New("rfc2136: server is required")
	}
	server := c.Server
	if _, _, err := net.SplitHostPort(server); err != nil {
		server = net.JoinHostPort(server, "53")
	}
	if c.TSIGKey == "" || c.TSIGSecret == "" {
		return nil, errors.New("rfc2136: tsig_key and tsig_secret are required")
	}
	if _, err := base64.StdEncoding.DecodeString(string(c.TSIGSecret)); err != nil {
		return nil, fmt.Errorf("rfc2136: tsig_secret is not base64: %w", err)
	}
	// config.TSIGAlgorithm is the one table, so serve refuses exactly what
	// config validate refuses (hmac-md5 included).
	name, err := config.TSIGAlgorithm(c.TSIGAlg)
	if err != nil {
		return nil, fmt.Errorf("rfc2136: %w", err)
	}
	alg := dns.Fqdn(name) // miekg/dns names them "hmac-sha256." etc.
	return &RFC2136{
		Server:  server,
		keyName: dns.CanonicalName(c.TSIGKey),
		alg:     alg,
		secret:  string(c.TSIGSecret),
		timeout: 10 * time.Second,
	}, nil
}

// AppendRecords adds recs to zone in one update and returns them.
func (p *RFC2136) AppendRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	rrs, out, err := toRRs(zone, recs, false)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	m.Insert(rrs)
	if err := p.exchange(ctx, m); err != nil {
		return nil, fmt.Errorf("rfc2136: append to %s: %w", zone, err)
	}
	return out, nil
}

// DeleteRecords removes recs from zone in one update. An empty Data removes
// the whole RRset of that name and type; an empty Type every record of the
// name. The server does not say which records existed, so all of recs come
// back.
func (p *RFC2136) DeleteRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	for _, rec := range recs {
		rr := rec.RR()
		name := libdns.AbsoluteName(rr.Name, zone)
		hdr := dns.RR_Header{Name: dns.Fqdn(name), Class: dns.ClassINET}
		switch {
		case rr.Type == "":
			m.RemoveName([]dns.RR{&dns.ANY{Hdr: hdr}})
		case rr.Data == "":
			t, ok := dns.StringToType[strings.ToUpper(rr.Type)]
			if !ok {
				return nil, fmt.Errorf("rfc2136: unknown record type %q", rr.Type)
			}
			hdr.Rrtype = t
			m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: hdr}})
		default:
			one, _, err := toRRs(zone, []libdns.Record{rec}, true)
			if err != nil {
				return nil, err
			}
			m.Remove(one)
		}
	}
	if err := p.exchange(ctx, m); err != nil {
		return nil, fmt.Errorf("rfc2136: delete from %s: %w", zone, err)
	}
	return recs, nil
}

// exchange sends the signed update m and checks the signed answer.
func (p *RFC2136) exchange(ctx context.Context, m *dns.Msg) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	m.SetTsig(p.keyName, p.alg, 300, time.Now().Unix())
	// miekg/dns verifies the TSIG of the response with the same secret and
	// fails the exchange if it is missing or wrong.
	c := &dns.Client{TsigSecret: map[string]string{p.keyName: p.secret}}
	resp, _, err := c.ExchangeContext(ctx, m, p.Server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, m, p.Server)
	}
	if err != nil {
		return err
	}
	if resp.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("server answered %s", dns.RcodeToString[resp.Rcode])
	}
	return nil
}

// toRRs converts libdns records to dns RRs under zone, and returns the
// records in libdns' typed form as certmagic expects them back. forDelete
// keeps a zero TTL (RFC 2136 section 2.5.4 wants 0 on deletes).
func toRRs(zone string, recs []libdns.Record, forDelete bool) ([]dns.RR, []libdns.Record, error) {
	rrs := make([]dns.RR, 0, len(recs))
	out := make([]libdns.Record, 0, len(recs))
	for _, rec := range recs {
		r := rec.RR()
		ttl := uint32(r.TTL / time.Second)
		if ttl == 0 && !forDelete {
			ttl = 60
		}
		if forDelete {
			ttl = 0
		}
		hdr := dns.RR_Header{Name: dns.Fqdn(libdns.AbsoluteName(r.Name, zone)), Class: dns.ClassINET, Ttl: ttl}
		var rr dns.RR
		if strings.EqualFold(r.Type, "TXT") {
			hdr.Rrtype = dns.TypeTXT
			// Build TXT directly: its value is free text, not zone syntax.
			rr = &dns.TXT{Hdr: hdr, Txt: splitTXT(r.Data)}
		} else {
			parsed, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", hdr.Name, ttl, r.Type, r.Data))
			if err != nil || parsed == nil {
				return nil, nil, fmt.Errorf("rfc2136: record %s %s: %v", r.Name, r.Type, err)
			}
			rr = parsed
		}
		rrs = append(rrs, rr)
		typed, err := r.Parse()
		if err != nil {
			typed = r
		}
		out = append(out, typed)
	}
	return rrs, out, nil
}

// splitTXT cuts s into the 255-byte strings a TXT record is made of.
func splitTXT(s string) []string {
	if s == "" {
		return []string{""}
	}
	var parts []string
	for len(s) > 255 {
		parts = append(parts, s[:255])
		s = s[255:]
	}
	return append(parts, s)
}
