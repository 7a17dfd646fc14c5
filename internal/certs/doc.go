// Package certs creates the certificates of an fmnode cluster with
// crypto/x509 and builds the TLS configurations that use them. The tests
// use it to run real nodes over mutual TLS; `fmnode cert create-ca |
// create-node | create-client | list` is a thin command line over it, in
// the spirit of `cockroach cert`.
//
// # Files
//
// Everything is PEM. Keys are PKCS#8, mode 0600; certificates 0644.
//
//	ca.crt, ca.key             CreateCA; LoadCA reads them back
//	                           (CreateCAFiles and LoadCAFiles: the key at
//	                           a path of its own, away from ca.crt)
//	node.crt, node.key         CreateNode: ExtKeyUsage ServerAuth and
//	                           ClientAuth, because a node both serves its
//	                           peers and dials them with one certificate
//	client.<name>.crt/.key     CreateClient: ClientAuth only, so a client
//	                           certificate cannot be used to impersonate a
//	                           node
//
// CreateNode and CreateClient also put the CA certificate into their
// directory as ca.crt (unless the same certificate is already there): a
// node's directory then holds the three files its tls.cert_file,
// tls.key_file and tls.ca_file name, and the CA key never has to be
// copied next to them.
//
// No function replaces an existing file unless Overwrite is set; the
// error names the file and wraps fs.ErrExist. A file is written to a
// temporary name, synced, then linked (or, with Overwrite, renamed) into
// place, so a reader — an agent reloading its certificate on SIGHUP —
// never sees half of one.
//
// # Validity
//
// A certificate is valid from an hour before it is issued (nodes' clocks
// differ; a certificate that is "not yet valid" on a peer is a confusing
// outage) to ValidFor after. ValidFor is bounded by MinValidFor and
// MaxValidFor, and a certificate may not outlive the CA that signs it:
// its verification would fail then with the CA's expiry, not its own.
//
// # TLS
//
// ServerTLS and ClientTLS build the configurations for the agent's API and
// its clients: TLS 1.3 only, the server requires and verifies a client
// certificate against the CA. They match nodenet.MutualTLS, which builds
// the node-to-node pair from the same PEM (read the three files and pass
// their bytes); the tests check that a node directory made here works
// with it.
package certs
