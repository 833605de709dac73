#!/bin/sh
# discovery.sh: a host discovery script as Horovod's --host-discovery-script runs it ("host:slots"
# lines), for tests/scenarios/mpi/elastic-grow*.yaml on one machine, whose hosts are the scenario's
# nodes: nodes 0 to 2 from the start, node 3 as well from a second after the first call.
start="${RH_ELASTIC_DIR:?run by rehearsal elastic}/discovery.start"
[ -f "$start" ] || date +%s.%N > "$start"
echo node0:1
echo node1:1
echo node2:1
awk -v s="$(cat "$start")" -v n="$(date +%s.%N)" 'BEGIN { if (n - s >= 1) print "node3:1" }'
