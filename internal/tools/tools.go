//go:build tools

// Package tools pins dependencies that packages still being written will
// import, so that concurrent work does not race on go.mod. Remove an entry
// once a real import exists.
package tools

import (
	_ "github.com/MicahParks/keyfunc/v3"
	_ "github.com/caddyserver/certmagic"
	_ "github.com/chromedp/chromedp"
	_ "github.com/coder/websocket"
	_ "github.com/docker/docker/client"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/goccy/go-yaml"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/hashicorp/golang-lru/v2"
	_ "github.com/letsencrypt/pebble/v2/ca"
	_ "github.com/letsencrypt/pebble/v2/db"
	_ "github.com/letsencrypt/pebble/v2/va"
	_ "github.com/letsencrypt/pebble/v2/wfe"
	_ "github.com/miekg/dns"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/singleflight"
	_ "golang.org/x/time/rate"
)
