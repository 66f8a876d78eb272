package testkit

import "strings"

// SizedHead is an HTTP/1.1 response head with status (e.g. "200 OK") and
// the header lines extra (each ending in CRLF), padded with an X-Big field
// of 'b's to exactly n bytes, blank line included: a head just under, at
// or over a size bound.
func SizedHead(status, extra string, n int) string {
	h := "HTTP/1.1 " + status + "\r\n" + extra + "X-Big: "
	return h + strings.Repeat("b", n-len(h)-len("\r\n\r\n")) + "\r\n\r\n"
}

// SizedHeadPad is the length of the X-Big value SizedHead pads with.
func SizedHeadPad(status, extra string, n int) int {
	return n - len("HTTP/1.1 "+status+"\r\n"+extra+"X-Big: ") - len("\r\n\r\n")
}
