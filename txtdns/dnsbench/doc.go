// Package dnsbench is `fmnode bench dns`: it starts the txtdns DNS server
// in a child process (the same binary re-executed with --serve, which
// publishes --partitions partitions and prints "listening ADDR"), loads it
// from the parent with --clients concurrent UDP clients, each keeping one
// query in flight over its own socket, and reports queries per second and
// latency percentiles over the measured window (after --warmup).
//
// Server and load generator are separate processes, so neither's garbage
// collector or scheduler skews the other beyond sharing the CPUs. Because
// the machine may be shared, the result also carries the CPU time each
// process spent per query (from /proc and getrusage) and the query rate
// that cost allows when the two have the CPUs to themselves.
//
// The child exits when its stdin closes (the parent is gone) or on
// SIGINT/SIGTERM; the parent closes the pipe, signals and waits, and kills
// it after 10 s.
package dnsbench
