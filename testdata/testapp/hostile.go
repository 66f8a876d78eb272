package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// hostileRoutes misbehave the way an app nobody reviewed may, so tests can
// check that nothing it sends reaches another user. Each first answers
// "for <path>?<query>" where it answers at all; what it plants carries
// "planted" in its body and a Set-Cookie.
var hostileRoutes = map[string]http.HandlerFunc{
	// A response and a second, unasked-for one behind it; ?later=1 sends
	// the second 20 ms after the first.
	"/hostile/extra": func(w http.ResponseWriter, r *http.Request) {
		raw(w, r, func(c io.Writer) {
			if r.URL.Query().Get("later") == "" {
				io.WriteString(c, answer(r)+planted) // one write: they arrive together
				return
			}
			io.WriteString(c, answer(r))
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, planted)
		})
	},
	// The same, then the app exits: the next container created on the
	// network may inherit this one's address.
	"/hostile/exit": func(w http.ResponseWriter, r *http.Request) {
		raw(w, r, func(c io.Writer) {
			io.WriteString(c, answer(r)+planted)
		})
		go func() {
			time.Sleep(100 * time.Millisecond)
			os.Exit(3)
		}()
	},
	// A 101 to a request that asked for no upgrade, then a planted answer.
	"/hostile/switch": func(w http.ResponseWriter, r *http.Request) {
		raw(w, r, func(c io.Writer) {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"+planted)
		})
	},
	// Promises 1000 bytes, sends 10, closes at once (not raw's wait for
	// the peer: the gateway must cut its client on the short body, not
	// when the app gives up).
	"/hostile/cut": func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.Flush()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
	},
	// ?n= bytes (default 20), one every ?every= (default 100ms).
	"/hostile/drip": func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil {
			n = 20
		}
		every, err := time.ParseDuration(r.URL.Query().Get("every"))
		if err != nil {
			every = 100 * time.Millisecond
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		rc := http.NewResponseController(w)
		for range n {
			if _, err := io.WriteString(w, "x"); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
	},
	// Never reads the request body and never answers.
	"/hostile/noread": func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	},
	// Allocates until the container's memory limit kills it.
	"/hostile/oom": func(w http.ResponseWriter, r *http.Request) {
		var hog [][]byte
		for {
			b := make([]byte, 8<<20)
			for i := range b {
				b[i] = byte(i)
			}
			hog = append(hog, b)
		}
	},
}

const planted = "HTTP/1.1 200 OK\r\nSet-Cookie: planted=1; Path=/\r\nContent-Length: 7\r\n\r\nplanted"

// answer is a complete response naming the request it answers.
func answer(r *http.Request) string {
	body := "for " + r.URL.Path + "?" + r.URL.RawQuery
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// raw hijacks the connection, lets write send bytes of its choosing and
// keeps the connection open (unread) for a while, as a keep-alive peer
// would.
func raw(w http.ResponseWriter, r *http.Request, write func(io.Writer)) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	brw.Flush()
	write(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	io.Copy(io.Discard, c)
}

// flood pushes n bytes over c in 64 KiB messages as fast as the peer takes
// them, then waits for the peer to go.
func flood(ctx context.Context, c *websocket.Conn, n int) {
	msg := make([]byte, 64<<10)
	for sent := 0; sent < n; sent += len(msg) {
		if c.Write(ctx, websocket.MessageBinary, msg) != nil {
			return
		}
	}
	<-ctx.Done()
}

// chatter sends a UDP datagram every d to the first address of the
// container's network (Docker's bridge gateway), port 9 (discard): an app
// that keeps its own network traffic going with no request in sight, as a
// sandbox that wants to stay awake would (CHATTER=500ms).
func chatter(d time.Duration) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		log.Printf("testapp: chatter: %v", err)
		return
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		gw := ipn.IP.Mask(ipn.Mask).To4()
		gw[3]++
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: gw, Port: 9})
		if err != nil {
			log.Printf("testapp: chatter: %v", err)
			return
		}
		log.Printf("testapp: chattering to %s every %s", gw, d)
		for range time.Tick(d) {
			c.Write([]byte("still here"))
		}
	}
}
