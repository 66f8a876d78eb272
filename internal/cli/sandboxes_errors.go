package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/previewgate/previewgate/adminapi"
)

// The sandboxes commands' own failures under --json: every failing
// subcommand prints one JSON object on stdout in the API's error shape,
// {"error": "...", "code": "..."}, whether the API answered it (its
// object as sent, adminapi.Error) or the CLI met it first (the codes below), so
// a script reading stdout always has something to parse. The message goes
// to stderr as without --json, and the exit status is the same.

// Codes of the failures the API did not answer. The API's own codes
// (docs/api.md) are snake_case too; bad_sandbox_id is the one both share.
const (
	codeUsage        = "usage"          // a command line the subcommand cannot read (exit 2), or a bad flag value
	codeBadID        = "bad_sandbox_id" // as the API answers a malformed id
	codeNoToken      = "no_token"       // neither --token nor $PREVIEWGATE_TOKEN
	codeConfig       = "config"         // the config file that says where the admin listener is cannot be read
	codeUnreachable  = "unreachable"    // no admin listener answers at the address tried
	codeTimeout      = "timeout"        // the CLI gave up waiting for the answer
	codeBadAnswer    = "bad_answer"     // an answer that is not what the call answers
	codeFollowFailed = "follow_failed"  // logs -f: the gateway said following failed
	codeStreamBroken = "stream_broken"  // logs -f: the stream broke or ended early
	codeFailed       = "failed"         // anything else
)

// cliError is a failure of a sandboxes subcommand that the API did not
// answer, with its code for --json. Its message is err's.
type cliError struct {
	code string
	err  error
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// failed gives err, a failure the API did not answer, its --json code.
func failed(code string, err error) error { return &cliError{code: code, err: err} }

// reportedUsage is a command line the flag set has answered already (the
// error and the usage on stderr): run exits 2 without printing it again
// (it is errFlags); msg is what --json prints.
type reportedUsage struct{ msg string }

func (e reportedUsage) Error() string        { return e.msg }
func (e reportedUsage) Is(target error) bool { return target == errFlags }

// errorCode is the --json code of err, a failure the API did not answer.
func errorCode(err error) string {
	var ce *cliError
	var ue usageError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, errFlags), errors.As(err, &ue):
		return codeUsage
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return codeTimeout
	}
	return codeFailed
}

// jsonError is what --json prints on stdout for err: the API's error
// object as it sent it if the API answered, else {"error", "code"} of the
// CLI's own (an answer that is no error object, such as a proxy's page,
// {"error"} naming its status); one line either way.
func jsonError(err error) []byte {
	var ae *adminapi.Error
	var b []byte
	switch {
	case errors.As(err, &ae) && ae.Body != nil:
		b = ae.Body
	case errors.As(err, &ae):
		b, _ = json.Marshal(map[string]string{"error": ae.Message})
	default:
		b, _ = json.Marshal(map[string]string{"error": err.Error(), "code": errorCode(err)})
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
}

// wantsJSON says whether args, a command line its flag set could not
// parse, ask for --json: the flag package stops at the first bad flag, so
// a --json after it was never read.
func wantsJSON(args []string) bool {
	want := false
	for _, a := range args {
		if a == "--" {
			break
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "-")
		if name == "json" {
			want = true
		}
		if v, ok := strings.CutPrefix(name, "json="); ok {
			b, err := strconv.ParseBool(v)
			want = err == nil && b
		}
	}
	return want
}
