// Package links is share links, whole (#23): the token format, the link
// as kept, minting, checking and granting (the cookie exchange included),
// and the errors a refusal carries. A link opens one existing sandbox, on
// one port, under one path prefix, until it expires or is revoked. It
// keeps no state of its own: a link is kept in its sandbox's record
// (package records, through the small interfaces Records and Keeper), and
// package auth owns the cookie's name and the origin rules. The gateway
// maps its errors to pages; the admin API calls it to mint, list and
// revoke. It decides no status or message, and never creates or wakes a
// sandbox.
//
// A link's token is "<id>.<expiry, unix seconds, base 36>.<32 random
// bytes, base64url>"; only its id and the SHA-256 of the whole token are
// kept, so a list never shows a secret and a stolen record opens nothing.
// The expiry in the token only chooses what an unknown link's refusal
// says (expired or not); what grants access is the kept record. The token
// travels once as ?previewgate_link= on a GET navigation, which Exchange
// trades for a cookie bound to that link's host, and then as that cookie;
// auth's Strip removes both before a request reaches the sandbox.
//
// The record is read from this replica's cache, which every re-check
// reloads: a revoke on any replica is seen here within the manager's
// RecheckEvery (5 s) plus one list call, and after a restart. A link
// minted on another replica moments ago is not cached yet: for an
// existing sandbox the request starts a reload of the record, at most one
// a second per sandbox (Records.RefreshLinks), and is answered at once
// from the cache, ErrUnknown — as for a sandbox that does not exist, which
// costs no store call. The gateway answers ErrUnknown 401 with
// Retry-After: 1, and a browser's page that loads it again a few times:
// the link opens once the reload read it, a second or so later. So an
// unknown link costs an attacker one store call a second per existing
// sandbox at most, waits for nothing and holds no request. If this
// replica's copy is stale (the store's list kept failing), a link starts
// a reload too and is refused with ErrUnavailable until one succeeds.
//
// A path is a prefix restriction (segment boundary: /docs holds /docs/a,
// not /docsx), and the link opens there. A dev server loading assets from
// the root (/@vite/, /_next/) needs a link for "/" (docs/links.md).
//
// Its promises, tested in check_test.go and end to end by the gateway's
// links_*_test.go:
//
//  1. Access is granted only on a kept record: the token's digest, port,
//     path and expiry match, and the record is not revoked. The expiry in
//     the token only chooses what an unknown link's refusal says.
//  2. A made-up link does not tell whether a sandbox exists: for a sandbox
//     that does not exist (Target.Sandbox "") it gets the answer an
//     unknown link of an existing sandbox gets (ErrUnknown), without a
//     store call; for an existing one Check never waits for the store
//     (RefreshLinks returns at once), so the answer takes as long.
//  3. Nothing is granted on a copy of the records this replica could not
//     refresh lately (ErrUnavailable): a revoke on another replica holds.
//  4. An upgrade (a WebSocket) opened by a link must come from the
//     preview's own origin or an allowed one, as for a token cookie
//     (auth.ErrOrigin).
//  5. A link for a path below "/" opens only a WebSocket upgrade: a
//     switch to another protocol (h2c, a raw stream) would carry requests
//     for any path on one connection, outside the link's scope (ErrScope).
package links
