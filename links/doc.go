// Package links is share links, whole (#23): the token format, the link
// as kept, minting, checking and granting, and the errors a refusal
// carries. A link opens one existing sandbox, on one port, under one path
// prefix, until it expires or is revoked. The gateway maps its errors to
// pages; the admin API calls it to mint, list and revoke. It keeps no
// state of its own: links are kept in their sandbox's record (package
// records), reached through the small interfaces declared here.
package links
