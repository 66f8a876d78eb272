//go:build !race

package gateway

const raceBuild = false
