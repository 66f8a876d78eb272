package main

import "testing"

// The reports as Debian's wrk 4.1 and h2load (nghttp2 1.52) print them.
const wrkReport = `Running 2s test @ http://127.0.0.1:3000/bytes?n=1024
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.48ms    1.02ms  21.30ms   81.00%
    Req/Sec    12.90k     1.10k   14.20k    70.00%
  Latency Distribution
     50%    2.31ms
     75%    2.90ms
     90%    3.60ms
     99%  870.00us
  25800 requests in 2.00s, 30.10MB read
  Non-2xx or 3xx responses: 3
  Socket errors: connect 0, read 2, write 0, timeout 1
Requests/sec:  12900.00
Transfer/sec:     15.05MB
`

const h2loadReport = `starting benchmark...
finished in 2.00s, 4270.50 req/s, 4.61MB/s
requests: 8541 total, 8797 started, 8541 done, 8540 succeeded, 1 failed, 0 errored, 0 timeout
status codes: 8540 2xx, 0 3xx, 0 4xx, 1 5xx
traffic: 9.22MB (9667236) total, 170.81KB (174906) headers (space savings 93.88%), 8.34MB (8745984) data
                     min         max         mean         sd        +/- sd
time for request:      512us     95.10ms     58.28ms     12.31ms    70.10%
time for connect:     3.12ms     20.11ms     11.02ms      5.10ms    62.50%
time to 1st byte:    10.01ms     40.20ms     22.31ms      8.00ms    56.25%
req/s           :     250.10      290.20      266.90       10.10    68.75%
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk([]byte(wrkReport))
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 25800 || r.seconds != 2 || r.rps != 12900 || r.p50 != 2.31 || r.p99 != 0.87 || r.errors != 6 {
		t.Errorf("got %+v", r)
	}
}

func TestParseH2load(t *testing.T) {
	r, err := parseH2load([]byte(h2loadReport))
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 8540 || r.seconds != 2 || r.rps != 4270.5 || r.mean != 58.28 || r.errors != 2 {
		t.Errorf("got %+v", r)
	}
}
