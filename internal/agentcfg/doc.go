// Package agentcfg is the configuration of one fmnode agent: what is local
// to a node (its name, id, place, data directory, addresses, secrets,
// logging). What the cluster agrees on (partition count, regions and their
// priority, timing profile, consistency, durability, blast-radius cap,
// never-promote regions) is the cluster spec in a register, not here.
//
// Load builds a Config from four sources, each overriding the one before:
// the defaults (Default), the YAML file, the environment (FMNODE_ variables)
// and the command-line flags. Every field has all three spellings, derived
// from its YAML path:
//
//	YAML                flag                  environment
//	node_id             --node-id             FMNODE_NODE_ID
//	bind.node_addr      --bind-node-addr      FMNODE_BIND_NODE_ADDR
//	tls.cert_file       --tls-cert-file       FMNODE_TLS_CERT_FILE
//	retry_join          --retry-join (again)  FMNODE_RETRY_JOIN (a,b,c)
//
// Unknown YAML keys, flags and FMNODE_ variables are errors that name
// them, as a typo must not silently leave a default in place. Validate
// checks every field and the relations between them (TLS all or nothing,
// a wildcard bind needs an advertise address, dns.zone with
// bind.dns_addr, no two listeners on one port) with no filesystem access,
// and reports every problem at once, each naming its field by YAML path;
// Check does what needs the filesystem. Reloadable tells a SIGHUP what it
// may apply (log level and format, rotated TLS files) and what takes a
// restart.
//
// A node's file (testdata/example.yaml is a complete one):
//
//	name: fm-eu1-a-01
//	node_id: 1
//	region: eu1
//	zone: eu1-a
//	cluster: prod
//	data_dir: data          # relative to this file's directory
//	bind:
//	  node_addr: 0.0.0.0:7400
//	  api_addr: 127.0.0.1:7401
//	  gossip_addr: 0.0.0.0:7402
//	advertise:
//	  node_addr: 127.0.1.11:7400
//	  gossip_addr: 127.0.1.11:7402
//	retry_join: [127.0.1.12:7402, 127.0.1.13:7402]
//	gossip_key: 8m7yqyvPJ6wZ7TJ0Y1tQmZm9mU4YQ2Ht6x8Tn0dQjlE=
//	tls:
//	  cert_file: tls/node.crt
//	  key_file: tls/node.key
//	  ca_file: tls/ca.crt
//	log: {level: info, format: json}
//	shutdown_timeout: 30s
package agentcfg
