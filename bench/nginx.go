package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// nginxProxy is nginx as the reference reverse proxy: upstream keepalive,
// HTTP/1.1 to the upstream, WebSocket upgrade headers, a TLS server with the
// bench certificate. Workers = cores, like GOMAXPROCS for the gateway.
type nginxProxy struct {
	cmd            *exec.Cmd
	plain, tls, h2 string // 127.0.0.1:port; h2: TLS with HTTP/2 by ALPN
	done           chan struct{}
}

const nginxConf = `worker_processes %d;
worker_rlimit_nofile 200000;
%s
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections 65000; }
http {
	access_log off;
	client_body_temp_path %[3]s/body;
	proxy_temp_path %[3]s/proxy;
	fastcgi_temp_path %[3]s/fastcgi;
	uwsgi_temp_path %[3]s/uwsgi;
	scgi_temp_path %[3]s/scgi;
	keepalive_requests 1000000;
	map $http_upgrade $connection_upgrade { default upgrade; "" ""; }
	upstream app {
		server %[4]s;
		keepalive 256;
		keepalive_requests 1000000;
	}
	%[8]s
	ssl_certificate %[3]s/cert.pem;
	ssl_certificate_key %[3]s/key.pem;
	server {
		listen %[5]s default_server;
		listen %[6]s ssl default_server;
		# nginx 1.22: "http2" on listen (1.25 spells it "http2 on;").
		listen %[7]s ssl http2 default_server;
		%[10]s
	}
	%[9]s
}
`

// nginxVite is the server block for the browser rows' dev server, chosen
// by server_name on the same listeners.
const nginxVite = `server {
		listen %[1]s;
		listen %[2]s ssl;
		listen %[3]s ssl http2;
		server_name %[4]s;
		%[5]s
	}`

// nginxLocation proxies everything to the upstream block named %[1]s.
const nginxLocation = `location / {
			proxy_pass http://%[1]s;
			proxy_http_version 1.1;
			proxy_set_header Host $host;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_read_timeout 1h;
			# 64 KiB bodies stay in memory instead of spilling to temp files.
			proxy_buffer_size 16k;
			proxy_buffers 8 16k;
		}`

// startNginx runs nginx in the foreground from dir (which holds cert.pem
// and key.pem) proxying to upstream, and vite's host to vite when set.
func startNginx(ctx context.Context, bin, dir, upstream, vite, viteHost string) (*nginxProxy, error) {
	plain, err := freePort()
	if err != nil {
		return nil, err
	}
	tlsAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	h2, err := freePort()
	if err != nil {
		return nil, err
	}
	viteUp, viteSrv := "", ""
	if vite != "" {
		viteUp = "upstream vite { server " + vite + "; keepalive 256; keepalive_requests 1000000; }"
		viteSrv = fmt.Sprintf(nginxVite, plain, tlsAddr, h2, viteHost, fmt.Sprintf(nginxLocation, "vite"))
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // workers must read the temp dir and the key
	}
	conf := fmt.Sprintf(nginxConf, runtime.NumCPU(), user, dir, upstream, plain, tlsAddr, h2, viteUp, viteSrv,
		fmt.Sprintf(nginxLocation, "app"))
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	n := &nginxProxy{cmd: cmd, plain: plain, tls: tlsAddr, h2: h2, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }()
	for _, a := range []string{plain, tlsAddr, h2} {
		if err := waitListen(ctx, a, n.done); err != nil {
			n.stop()
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return nil, fmt.Errorf("nginx not listening on %s: %w\n%s", a, err, b)
		}
	}
	return n, nil
}

func (n *nginxProxy) pids() []int { return childrenOf(n.cmd.Process.Pid) }

// stop ends nginx (SIGTERM is its fast stop; SIGKILL after 5s).
func (n *nginxProxy) stop() {
	if n == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitListen(ctx context.Context, addr string, dead <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-dead:
			return fmt.Errorf("exited")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
